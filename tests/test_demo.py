from scrapy_robots_coccoc import demo


def test_demo_explains_each_decision(capsys):
    assert demo.main() == 0
    out = capsys.readouterr().out
    assert "allowed    /cats/wild/lions" in out and "Allow: /cats/wild (line 7)" in out
    assert "disallowed /feed/list.ajax " in out and "Crawl-delay for coccocbot-web: 1.0 s" in out
