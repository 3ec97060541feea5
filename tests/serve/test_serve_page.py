"""The search page at / in a real headless browser (Debian's Chromium and ChromeDriver, which .ci/run
installs) against the service started as a user starts it: the ranking it shows is the REST API's,
its highlights are the hits' explained terms, and a refused request shows the refusal.

The service is started with an API key, so the page's key field (sent as a Bearer header, kept in
sessionStorage) is on the path of every test. docs/serving-page.png is this module's screenshot:
    LSR_PYSERINI_PAGE_SCREENSHOT=docs/serving-page.png python -m pytest tests/serve/test_serve_page.py
"""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from service import Service, sample_queries

pytestmark = pytest.mark.xdist_group("serve")  # one worker: the sample indexes built once

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
API_KEY = "page-test-key-0123456789"
MAX_HITS = 50
WAIT = 30  # seconds for the page to list indexes or show results


@pytest.fixture(scope="module")
def browser():
    missing = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not path.exists()]
    if missing:
        pytest.fail(f"{' and '.join(missing)} missing: .ci/run installs them (apt-get install chromium chromium-driver)",
                    pytrace=False)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service as ChromeService

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)  # with the driver's path too: selenium-manager downloads nothing
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1100,800"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=ChromeService(str(CHROMEDRIVER)), options=options)
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",  # a 1100x800 viewport, as in docs/serving-page.png
                           {"width": 1100, "height": 800, "deviceScaleFactor": 1, "mobile": False})
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def service(tmp_path_factory, service_indexes):
    folder = tmp_path_factory.mktemp("serve-page")
    indexes = service_indexes
    key_file = folder / "api-key"
    key_file.write_text(API_KEY + "\n")
    started = Service("--index", f"sample={indexes['splade']}", "--encoder", "splade-tiny", "--max-hits", MAX_HITS,
                      "--api-key-file", key_file, "--quiet", folder=folder)
    with started:
        yield started
        assert started.stop() == 0, started.log.read_text()


def wait(driver, condition, message: str):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, WAIT).until(lambda d: condition(d), message)


def by_css(driver, selector):
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, selector)


def index_names(driver) -> list[str]:
    return [option.get_attribute("value") for option in by_css(driver, "#index option")]


def open_page(driver, service) -> None:
    """The page with the key given (typed in, or kept in sessionStorage) and the indexes listed."""
    from selenium.webdriver.common.keys import Keys

    driver.get(service.url + "/")
    key = by_css(driver, "#api-key")[0]
    if key.get_attribute("value") != API_KEY:  # a fresh session: the page asks for the key
        wait(driver, lambda d: "API key" in by_css(d, "#error")[0].text, "no 401 shown without the key")
        key.clear()
        key.send_keys(API_KEY + Keys.TAB)  # 'change' stores the key and lists the indexes again
    wait(driver, lambda d: "sample" in index_names(d), "the index chooser never held 'sample'")
    assert not by_css(driver, "#error")[0].is_displayed()


def test_page_shows_the_api_ranking_with_highlighted_terms(browser, service, tmp_path):
    from selenium.webdriver.common.keys import Keys

    open_page(browser, service)
    query = dict(sample_queries())["q2"]  # how do vaccines create immune memory
    hits = 10
    box = by_css(browser, "#query")[0]
    box.clear()
    box.send_keys(query + Keys.ENTER)  # Enter submits
    wait(browser, lambda d: by_css(d, ".hit") and by_css(d, "#took")[0].text, "no results shown")

    with service.client(headers={"Authorization": f"Bearer {API_KEY}"}) as client:
        response = client.post("/v1/indexes/sample/search", json={"query": query, "hits": hits, "explain": True})
    assert response.status_code == 200, response.text
    expected = response.json()["candidates"]
    shown = by_css(browser, ".hit")
    assert len(shown) == len(expected) == min(hits, 12)  # the sample holds 12 documents
    assert [hit.find_element("css selector", ".docid").text for hit in shown] == [c["docid"] for c in expected]
    marks = 0
    for hit, candidate in zip(shown, expected):
        assert float(hit.find_element("css selector", ".score").text) == pytest.approx(candidate["score"], rel=1e-4)
        # the title set apart above the text; highlighting wraps both without changing them
        title, text = set_apart(hit)
        assert title == candidate["title"] and title + " " + text == candidate["document_txt"]
        terms = {t["term"]: t for t in candidate["terms"]}
        for mark in hit.find_elements("css selector", "mark.term"):
            term = mark.get_attribute("data-term")
            assert term in terms, (candidate["docid"], term, sorted(terms))
            assert mark.get_attribute("textContent").lower() == term.removeprefix("##")
            assert "contribution" in mark.get_attribute("title")
            marks += 1
        rows = hit.find_elements("css selector", ".contributions tbody tr")
        assert [row.find_element("css selector", "td").get_attribute("textContent") for row in rows] == list(terms)
        assert all(row.get_attribute("title").startswith(term + ": contribution") for row, term in zip(rows, terms))
    assert marks >= 1
    folded = shown[0].find_element("css selector", ".contributions")  # the top hit's further terms unfold
    if len(expected[0]["terms"]) > 8:
        assert sum(row.is_displayed() for row in folded.find_elements("css selector", "tbody tr")) == 8
        folded.find_element("css selector", "button.link").click()
        assert all(row.is_displayed() for row in folded.find_elements("css selector", "tbody tr"))
    took = by_css(browser, "#took")[0].text
    assert re.search(r"search \d+(\.\d+)? ms", took) and re.search(r"round trip \d+(\.\d+)? ms", took), took

    screenshot = tmp_path / "search-page.png"
    assert browser.save_screenshot(str(screenshot))
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and screenshot.stat().st_size > 10_000
    if os.environ.get("LSR_PYSERINI_PAGE_SCREENSHOT"):
        shutil.copyfile(screenshot, os.environ["LSR_PYSERINI_PAGE_SCREENSHOT"])

    # the query is in the address and the key in sessionStorage: a reload searches again, no key typed
    browser.refresh()
    wait(browser, lambda d: len(by_css(d, ".hit")) == len(expected), "a reload did not search again")
    assert by_css(browser, "#api-key")[0].get_attribute("value") == API_KEY
    assert [hit.text for hit in by_css(browser, ".hit .docid")] == [c["docid"] for c in expected]


def set_apart(hit) -> tuple[str, str]:
    """A hit's (title, text) as shown, asserting the title is set apart: its own line above the text,
    bolder than it, which does not repeat it (issue 45: "the title is not set apart from the text")."""
    title, text = hit.find_element("css selector", ".title"), hit.find_element("css selector", ".text")
    assert title.tag_name == "h3" and title.is_displayed()
    assert title.rect["y"] + title.rect["height"] <= text.rect["y"], (title.rect, text.rect)
    assert int(title.value_of_css_property("font-weight")) >= 600 > int(text.value_of_css_property("font-weight"))
    return title.get_attribute("textContent"), text.get_attribute("textContent")


def test_a_hit_without_a_title_shows_its_text_alone(browser, service):
    """Collections without titles (and indexes written before titles were kept) show the text as
    before; a title that does not begin the text is shown apart and the text whole."""
    open_page(browser, service)
    shown = browser.execute_script(
        "const out = [];"
        "for (const c of arguments[0]) {"
        "  const li = window.searchPage.renderHit(c, 1, 'sample'); document.body.append(li);"
        "  out.push([li.querySelector('.title') && li.querySelector('.title').textContent,"
        "            li.querySelector('.text').textContent]); li.remove(); }"
        "return out;",
        [{"docid": "a", "score": 1.0, "document_txt": "Coral reefs bleach in warm water.", "terms": []},
         {"docid": "b", "score": 1.0, "document_txt": "Reefs Coral reefs bleach.", "title": "Reefs", "terms": []},
         {"docid": "c", "score": 1.0, "document_txt": "Body only.", "title": "Elsewhere", "terms": []},
         {"docid": "d", "score": 1.0, "document_txt": "Reefsy text.", "title": "Reefs", "terms": []}])
    assert shown == [[None, "Coral reefs bleach in warm water."], ["Reefs", "Coral reefs bleach."],
                     ["Elsewhere", "Body only."], ["Reefs", "Reefsy text."]]


def test_a_refused_search_shows_the_field(browser, service):
    open_page(browser, service)
    by_css(browser, "#query")[0].send_keys("vitamin d")
    hits = by_css(browser, "#hits")[0]
    hits.clear()
    hits.send_keys(str(MAX_HITS * 2))
    by_css(browser, "#search")[0].click()
    wait(browser, lambda d: by_css(d, "#error")[0].is_displayed(), "no error shown")
    error = by_css(browser, "#error")[0].text
    assert error.startswith("422") and "hits" in error and "(field: hits)" in error, error
    assert not by_css(browser, ".hit") and not by_css(browser, "#took")[0].text


def test_highlighting_escapes_text_and_follows_wordpiece(browser, service):
    open_page(browser, service)
    text = '<img src=x onerror="window.pwned=1"> Corals & helped, gastritis in D-lab; dice.'
    terms = [{"term": term, "query_weight": 1.0, "document_weight": 2.0, "contribution": 2.0}
             for term in ("img", "coral", "##s", "help", "##itis", "d", "di")]
    html, seen, pwned = browser.execute_script(
        "const {fragment, seen} = window.searchPage.highlight(arguments[0], arguments[1]);"
        "const p = document.createElement('p'); p.append(fragment); document.body.append(p);"
        "return [p.innerHTML, [...seen].sort(), window.pwned === undefined ? null : window.pwned];", text, terms)
    marked = re.sub(r'<mark class="term" data-term="([^"]+)" title="[^"]+">([^<]*)</mark>', r"[\1:\2]", html)
    # coral+##s spell "Corals"; help begins "helped"; ##itis ends "gastritis"; "di" (2 letters) does not begin "dice"
    assert marked == ('&lt;[img:img] src=x onerror="window.pwned=1"&gt; [coral:Coral][##s:s] &amp; [help:help]ed, '
                      'gastr[##itis:itis] in [d:D]-lab; dice.')
    assert seen == ["##itis", "##s", "coral", "d", "help", "img"] and pwned is None



def test_the_page_says_what_the_index_is_shows_the_query_opens_documents_and_pages(browser, service):
    """Finding 8: nothing said what the index is, the query's own weights were not shown, the docid
    looked like a link and was not one, and there was no paging."""
    from selenium.webdriver.common.keys import Keys

    open_page(browser, service)
    wait(browser, lambda d: by_css(d, "#index-info")[0].text, "the index was not described")
    assert by_css(browser, "#index-info")[0].text == \
        "sample: engine lucene · encoder splade-tiny · 12 documents · impact scores"
    hits = by_css(browser, "#hits")[0]
    hits.clear()
    hits.send_keys("5")
    query = dict(sample_queries())["q2"]
    box = by_css(browser, "#query")[0]
    box.clear()
    box.send_keys(query + Keys.ENTER)
    wait(browser, lambda d: len(by_css(d, ".hit")) == 5, "no 5 results shown")
    with service.client(headers={"Authorization": f"Bearer {API_KEY}"}) as client:
        answer = client.post("/v1/indexes/sample/search", json={"query": query, "hits": 10, "explain": True}).json()
        top = answer["candidates"][0]["docid"]
        document = client.get(f"/v1/indexes/sample/documents/{top}").json()
    shown = [(term.get_attribute("data-term"), term.find_element("css selector", ".weight").text)
             for term in by_css(browser, "#query-terms .qterm")]
    assert shown == [(t["term"], f"{t['weight']:g}") for t in answer["query_terms"]] and shown, shown
    by_css(browser, ".hit a.docid")[0].click()  # the docid opens the document
    wait(browser, lambda d: by_css(d, "#document")[0].is_displayed(), "the document did not open")
    assert by_css(browser, "#document-id")[0].text == top
    title, text = by_css(browser, "#document-title")[0], by_css(browser, "#document-text")[0]
    assert title.is_displayed() and title.text == document["title"]  # set apart here too
    assert title.get_attribute("textContent") + " " + text.get_attribute("textContent") == document["contents"]
    by_css(browser, "#document-close")[0].click()
    wait(browser, lambda d: not by_css(d, "#document")[0].is_displayed(), "the document did not close")
    by_css(browser, "#more")[0].click()  # the next page: 5 + 10 asked, the sample's 12 shown
    wait(browser, lambda d: len(by_css(d, ".hit")) == 12, "More results did not show the rest")
    assert [hit.text for hit in by_css(browser, ".hit .docid")][:10] == [c["docid"] for c in answer["candidates"]]
    assert not by_css(browser, "#more")[0].is_displayed()  # fewer than asked: nothing more


# ReDoc's bundle names its own "powered by" logo on its CDN; offline only that image is missing
REDOC_LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg"


@pytest.mark.parametrize("page, allowed", [("/docs", set()), ("/redoc", {REDOC_LOGO})])
def test_api_docs_work_offline(browser, service, page, allowed):
    """/docs (Swagger UI) and /redoc draw the API from the service's own copies of their scripts and styles:
    nothing else is fetched from another host (CI and many users' machines reach no CDN), and the routes
    are listed."""
    browser.get(service.url + page)
    route = "/v1/indexes/{index}/search"
    wait(browser, lambda d: route in d.find_element("css selector", "body").text.replace("\u200b", ""),
         f"{page} never listed {route}")
    fetched = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    links = [element.get_attribute(attribute) for element, attribute in
             [(e, "src") for e in by_css(browser, "script[src], img[src]")] +
             [(e, "href") for e in by_css(browser, "link[href]")]]
    elsewhere = {url for url in fetched + links if not url.startswith(service.url)} - allowed
    assert not elsewhere, elsewhere
    assert any(url.endswith("/openapi.json") for url in fetched), fetched
