"""An example Scrapy project that obeys robots.txt the way Coc Coc's robots do."""
