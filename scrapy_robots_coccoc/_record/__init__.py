"""The compliance record (``ROBOTSTXT_RECORD_DIR``): what each decision entry holds and how it is reproduced, the
record's files and how they are written and read. Shared by the crawl, which writes it, and ``verify``."""
