"""The REST service on a tiny real sparse bundle: response objects, limits, overload, and the
viewer page in a real headless browser."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time

import pytest
from fastapi.testclient import TestClient
from support import build_sparse_bundle

from babelink.formats.document import Document
from babelink.link.records import normalize_record
from babelink.linker import Linker
from babelink.serve import ServiceLimits, create_app

NAMES = {
    "C0011849": ["Diabetes mellitus", "Diabetes", "糖尿病", "סוכרת"],
    "C0020538": ["Hypertension", "High blood pressure", "高血压", "יתר לחץ דם"],
    "C0004096": ["Asthma", "Asma"],
}
JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def bundle_path(tmp_path_factory):
    return build_sparse_bundle(NAMES, tmp_path_factory.mktemp("serve") / "bundle")


@pytest.fixture(scope="module")
def linker(bundle_path):
    return Linker.open(bundle_path, recall_threshold=0.5, link_threshold=0.8, overlap="best")


@pytest.fixture(scope="module")
def client(linker):
    with TestClient(create_app(linker)) as client:
        yield client


def _error(response, status: int) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error", "detail"}
    return body


def test_normalize_single_and_batch(client, linker):
    single = client.post("/normalize", json={"mentions": ["糖尿病"]})
    assert single.status_code == 200
    [result] = single.json()["results"]
    assert 0.0 <= result["candidates"][0].pop("probability") <= 1.0
    assert result == {"mention": "糖尿病", "candidates": [
        {"id": "C0011849", "name": "Diabetes mellitus", "matched_name": "糖尿病", "score": 1.0,
         "codes": {"UMLS": "C0011849"}}],
        "provenance": linker.bundle.provenance}
    mentions = ["asthma", "יתר לחץ דם", "diabetes melitus", "asthma"]
    batch = client.post("/normalize", json={"mentions": mentions, "top_k": 2}).json()["results"]
    assert batch == [normalize_record(m, c, linker.bundle.provenance)
                     for m, c in zip(mentions, linker.normalize(mentions, top_k=2))]
    assert [r["candidates"][0]["id"] for r in batch] == ["C0004096", "C0020538", "C0011849", "C0004096"]
    assert all(1 <= len(r["candidates"]) <= 2 for r in batch)
    assert (
        len(client.post("/normalize", json={"mentions": ["diabetes"], "top_k": 1}).json()["results"][0]["candidates"])
        == 1
    )
    assert client.post("/normalize", json={"mentions": []}).json() == {"results": []}


def test_normalize_answers_the_objects_the_cli_writes(client, bundle_path):
    mentions = ["asthma", "高血压"]
    cli = subprocess.run(
        [
            sys.executable,
            "-c",
            "from babelink.cli import main; main()",
            "normalize",
            "--bundle",
            str(bundle_path),
            "--top-k",
            "3",
            *mentions,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert cli.returncode == 0, cli.stderr
    api = client.post("/normalize", json={"mentions": mentions, "top_k": 3}).json()["results"]
    assert api == [json.loads(line) for line in cli.stdout.splitlines()]


def test_link_one_text_offsets(client):
    text = "🙂 患者有2型糖尿病和高血压。"
    body = client.post("/link", json={"text": text}).json()
    assert body["id"] == "" and body["lang"] == "zh"  # guessed
    assert [(m["start"], m["end"], m["text"], m["concept"]) for m in body["mentions"]] == [
        (7, 10, "糖尿病", "C0011849"), (11, 14, "高血压", "C0020538")]
    assert all(text[m["start"]:m["end"]] == m["text"] for m in body["mentions"])
    assert set(body["mentions"][0]) >= {"start", "end", "text", "concept", "name", "score", "matched_name", "detector"}


def test_link_batch_keeps_ids_and_order(client, linker):
    documents = [{"id": "he", "text": "לחולה יש סוכרת וגם יתר לחץ דם.", "lang": "he"},
                 {"id": "empty", "text": "Nothing to see."},
                 {"id": "en", "text": "Asthma and diabetes mellitus.", "lang": "en"}]
    body = client.post("/link", json={"documents": documents}).json()
    expected = [
        d.to_dict()
        for d in linker.link_documents([Document(d["id"], d["text"], lang=d.get("lang")) for d in documents])
    ]
    assert body == {"documents": expected}
    hebrew = body["documents"][0]["mentions"]
    assert [(m["start"], m["end"], m["concept"]) for m in hebrew] == [(9, 14, "C0011849"), (19, 29, "C0020538")]
    assert [(d["id"], d["lang"]) for d in body["documents"]] == [("he", "he"), ("empty", "en"), ("en", "en")]
    assert body["documents"][1]["mentions"] == []


def test_a_bad_document_of_a_batch_answers_its_error_in_its_place(client):
    documents = [{"id": "ok", "text": "Asthma."}, {"id": "odd", "text": "Asthma.", "lang": "zz"},
                 {"id": "ok2", "text": "Diabetes mellitus."}]
    response = client.post("/link", json={"documents": documents})
    assert response.status_code == 200
    body = response.json()["documents"]
    assert [d["id"] for d in body] == ["ok", "odd", "ok2"] and set(body[1]) == {"id", "error"}
    assert "'zz'" in body[1]["error"] and body[0]["mentions"] and body[2]["mentions"]
    assert client.post("/link", json={"text": "Asthma.", "lang": "zz"}).status_code == 422


def test_health(client, bundle_path):
    body = client.get("/health").json()
    assert body["status"] == "ok"
    assert body["bundle"]["path"] == str(bundle_path)
    assert body["bundle"]["retriever"] == "sparse"
    assert body["bundle"]["kb"] == {"concepts": 3, "names": 10, "strings": 10}
    assert body["bundle"]["encoder"] is None
    assert body["kb_size"] == 3
    assert body["model"].startswith("sparse")
    assert body["admitted"] == 0
    assert body["limits"]["queue"] == 32


def test_the_api_pages_need_no_network(client):
    """/docs and /redoc load their scripts from the service itself, not a CDN an offline network lacks."""
    for page in ("/docs", "/redoc"):
        html = client.get(page).text
        scripts = [line for line in html.splitlines() if "<script src=" in line or ".js" in line]
        assert scripts and not [line for line in scripts if "cdn" in line or "https://" in line], scripts
    assert client.get("/static-offline-docs/swagger-ui-bundle.js").status_code == 200
    assert client.get("/static-offline-docs/redoc.standalone.js").status_code == 200


def test_openapi_schema_documents_the_api(client):
    schema = client.get("/openapi.json").json()
    assert {"/normalize", "/link", "/health"} <= set(schema["paths"])
    assert "/" not in schema["paths"]
    components = schema["components"]["schemas"]
    assert {"NormalizeRequest", "NormalizeResponse", "LinkText", "LinkBatch", "LinkedDocumentOut", "ErrorOut"} <= set(
        components
    )
    assert set(schema["paths"]["/normalize"]["post"]["responses"]) >= {"200", "400", "413", "415", "422", "429",
                                                                         "503"}
    # every field an answer carries is documented
    [result] = client.post("/normalize", json={"mentions": ["high blood pressure"]}).json()["results"]
    candidate = result["candidates"][0]
    mention = client.post("/link", json={"text": "He has asthma."}).json()["mentions"][0]
    assert set(candidate) <= set(components["CandidateOut"]["properties"]) and "codes" in candidate
    assert set(mention) <= set(components["MentionOut"]["properties"]) and "codes" in mention
    assert {"translated", "codes"} <= set(components["MentionOut"]["properties"])


def test_viewer_page_is_self_contained(client):
    response = client.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    page = response.text
    assert '<textarea id="text" dir="auto"' in page and 'id="result" dir="auto"' in page
    assert "innerHTML" not in page and "http://" not in page and "https://" not in page
    assert "Array.from(text)" in page


def test_a_form_or_text_body_is_told_to_be_json(client):
    for sent in ({"data": {"text": "asthma"}}, {"content": b"asthma", "headers": {"content-type": "text/plain"}}):
        error = _error(client.post("/link", **sent), 415)
        assert error["error"] == "unsupported media type" and "Content-Type: application/json" in error["detail"]


@pytest.mark.parametrize(
    ("path", "body", "status"),
    [
        ("/normalize", b'{"mentions": ["asthma"', 400),  # malformed JSON
        ("/link", b"\xff\xfe", 400),  # not UTF-8
        ("/normalize", b'{"mentions": "asthma"}', 422),  # a string, not a list
        ("/normalize", b'{"mentions": [1, 2]}', 422),
        ("/normalize", b'{"mentions": ["asthma"], "top_k": 0}', 422),
        ("/normalize", b'{"mentions": ["asthma"], "top_k": "3"}', 422),
        ("/normalize", b'{"mentions": ["asthma"], "extra": 1}', 422),
        ("/normalize", b"{}", 422),
        ("/link", b'{"text": 3}', 422),
        ("/link", b'{"documents": [{"text": "asthma"}]}', 422),  # id missing
        ("/link", b'{"documents": [{"id": "1", "text": "a"}, {"id": "1", "text": "b"}]}', 422),  # id repeated
        ("/link", b"[1]", 422),
    ],
)
def test_malformed_requests_get_one_json_error_shape(client, path, body, status):
    error = _error(client.post(path, content=body, headers=JSON), status)
    assert isinstance(error["detail"], list) and error["detail"][0]["loc"][0] == "body"


def test_unusable_mentions_and_texts_get_422_with_the_message(client):
    assert (
        "empty after normalisation"
        in _error(client.post("/normalize", json={"mentions": ["asthma", "  "]}), 422)["detail"]
    )
    lone_surrogate = b'{"mentions": ["\\ud800asthma"]}'
    assert "not valid Unicode" in _error(client.post("/normalize", content=lone_surrogate, headers=JSON), 422)["detail"]
    assert (
        "not valid Unicode" in _error(client.post("/link", content=b'{"text": "\\ud800"}', headers=JSON), 422)["detail"]
    )
    assert "1,000-character limit" in _error(client.post("/normalize", json={"mentions": ["x" * 1001]}), 422)["detail"]
    for path, body in (("/normalize", {"mentions": ["asthma"], "lang": "english"}),
                       ("/link", {"text": "asthma", "lang": "english"})):
        assert "'english' is not a language code" in _error(client.post(path, json=body), 422)["detail"]


def test_unknown_routes_and_methods_keep_the_error_shape(client):
    assert _error(client.get("/nope"), 404)["error"] == "not found"
    assert _error(client.get("/normalize"), 405)["error"] == "method not allowed"


def test_size_limits_give_413(linker):
    limits = ServiceLimits(max_body_bytes=2_000, max_mentions=3, max_documents=2, max_text_chars=40)
    with TestClient(create_app(linker, limits)) as client:
        assert "2,000 bytes" in _error(client.post("/normalize", json={"mentions": ["a" * 500] * 5}), 413)["detail"]
        # a chunked body (no Content-Length) is cut off as it streams in
        chunks = iter([b'{"mentions": ["', b"a" * 1500, b"a" * 1500, b'"]}'])
        _error(client.post("/normalize", content=chunks, headers=JSON), 413)
        assert (
            "4 mentions exceed the limit of 3"
            in _error(client.post("/normalize", json={"mentions": ["asthma"] * 4}), 413)["detail"]
        )
        documents = [{"id": str(n), "text": "asthma"} for n in range(3)]
        assert (
            "3 documents exceed the limit of 2"
            in _error(client.post("/link", json={"documents": documents}), 413)["detail"]
        )
        assert "41 characters exceed" in _error(client.post("/link", json={"text": "a" * 41}), 413)["detail"]
        long_document = [{"id": "long", "text": "asthma " * 6}]
        assert "'long'" in _error(client.post("/link", json={"documents": long_document}), 413)["detail"]
        assert client.post("/link", json={"text": "asthma"}).status_code == 200


class _Gate:
    """Holds the linker's `normalize` calls until opened: a real linker made slow on demand."""

    def __init__(self, linker: Linker):
        self.entered = threading.Event()
        self.open = threading.Event()
        self.outcomes: list[str] = []  # of the real calls, once through the gate: "answered" or the exception's name
        self.linker = Linker(linker.bundle, linker.generator, linker.link_params)

        def normalize(*args, **kwargs):
            self.entered.set()
            assert self.open.wait(30), "the test never opened the gate"
            try:
                answer = linker.normalize(*args, **kwargs)
            except Exception as error:
                self.outcomes.append(type(error).__name__)
                raise
            self.outcomes.append("answered")
            return answer

        self.linker.normalize = normalize


@pytest.fixture
def gate(linker):
    gate = _Gate(linker)
    yield gate
    gate.open.set()  # never leave a worker thread blocked


def test_a_full_queue_answers_429_at_once_and_health_still_answers(gate):
    with TestClient(create_app(gate.linker, ServiceLimits(queue=1, timeout=10))) as client:
        first: dict = {}
        thread = threading.Thread(
            target=lambda: first.update(response=client.post("/normalize", json={"mentions": ["asthma"]}))
        )
        thread.start()
        assert gate.entered.wait(10)
        response = client.post("/normalize", json={"mentions": ["asthma"]})
        # answered while the first call still holds the only slot: refused at once, not queued behind it
        assert "response" not in first
        assert _error(response, 429)["error"] == "overloaded"
        assert response.headers["retry-after"] == "1"
        health = client.get("/health")
        assert health.status_code == 200 and health.json()["admitted"] == 1
        gate.open.set()
        thread.join(10)
        assert first["response"].status_code == 200
        assert client.post("/normalize", json={"mentions": ["asthma"]}).status_code == 200


def test_a_slow_request_answers_503_keeps_its_slot_until_its_work_stops_and_the_work_stops(gate):
    with TestClient(create_app(gate.linker, ServiceLimits(queue=1, timeout=0.05))) as client:
        response = client.post("/normalize", json={"mentions": ["asthma"]})
        assert _error(response, 503)["error"] == "timeout"
        assert response.headers["retry-after"] == "1"
        assert gate.entered.is_set()
        # the abandoned call still runs: it keeps the one slot, so load cannot pile up behind it
        assert _error(client.post("/normalize", json={"mentions": ["asthma"]}), 429)["error"] == "overloaded"
        gate.open.set()
        deadline = time.monotonic() + 10
        while client.get("/health").json()["admitted"] and time.monotonic() < deadline:
            time.sleep(0.01)
        # the real linker, reached after the request was abandoned, stopped at its first check
        assert gate.outcomes == ["Cancelled"]
        gate.open.clear()
        threading.Timer(0.2, gate.open.set).start()
        with TestClient(create_app(gate.linker, ServiceLimits(queue=1, timeout=10))) as patient:
            assert patient.post("/normalize", json={"mentions": ["asthma"]}).status_code == 200
        assert gate.outcomes == ["Cancelled", "answered"]


def test_serve_cli_with_a_missing_bundle_exits_1_with_one_line(tmp_path):
    result = subprocess.run([sys.executable, "-c", "from babelink.cli import main; main()", "serve", "--bundle",
                             str(tmp_path / "nonexistent")], capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("babelink: error: ") and "no such bundle directory" in result.stderr


# --- the viewer in a real browser -----------------------------------------------------------

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")


@pytest.fixture(scope="module")
def live_url(linker):
    """The app on a free loopback port, served by uvicorn in a background thread."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(create_app(linker), host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started, "uvicorn did not start"
    port = server.servers[0].sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}/"
    server.should_exit = True
    thread.join(10)


@pytest.fixture(scope="module")
def browser():
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.skip("chromium and chromedriver not installed (apt-get install chromium chromium-driver)")
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


def test_viewer_highlights_mentions_after_astral_characters(browser, live_url):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    text = "🙂🙂 לחולה יש סוכרת. 🧪 患者有高血压。"
    browser.get(live_url)
    textarea = browser.find_element(By.ID, "text")
    assert textarea.get_attribute("dir") == "auto"
    # ChromeDriver types only Basic Multilingual Plane characters: the emoji go in as the value.
    browser.execute_script("arguments[0].value = arguments[1];", textarea, text)
    browser.find_element(By.ID, "link").click()
    marks = WebDriverWait(browser, 20).until(lambda driver: driver.find_elements(By.CSS_SELECTOR, "#result mark"))
    assert [mark.text for mark in marks] == ["סוכרת", "高血压"]
    assert "C0011849" in marks[0].get_attribute("title") and "Diabetes mellitus" in marks[0].get_attribute("title")
    assert "C0020538" in marks[1].get_attribute("title")
    assert browser.find_element(By.ID, "result").text == text
    assert browser.find_element(By.ID, "status").text.startswith("2 mentions")


def test_viewer_shows_user_text_as_text_not_html(browser, live_url):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    text = '<img src=x onerror="document.title=\'pwned\'"> asthma'
    browser.get(live_url)
    browser.execute_script("arguments[0].value = arguments[1];", browser.find_element(By.ID, "text"), text)
    browser.find_element(By.ID, "link").click()
    marks = WebDriverWait(browser, 20).until(lambda driver: driver.find_elements(By.CSS_SELECTOR, "#result mark"))
    assert [mark.text for mark in marks] == ["asthma"]
    assert browser.find_elements(By.CSS_SELECTOR, "#result img") == []
    assert browser.find_element(By.ID, "result").text == text
    assert browser.title != "pwned"
