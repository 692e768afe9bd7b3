"""Load test of `babelink serve`: throughput, latency and errors under concurrent clients.

    python benchmarks/serve_load.py --bundle DIR [--requests 2000] [--concurrency 8 16 32] [--link]
                                    [--workers 1] [--queue 32] [--timeout 30] [--retry-after]
                                    [--slow-clients 0] [--no-write]

Starts `babelink serve --bundle DIR` in its own process on a free loopback port, waits for
/health, then for each concurrency C sends N requests from C concurrent clients (httpx.AsyncClient,
each waiting for its answer before sending the next): /normalize of one mention drawn (seeded) from
realistic disease mentions in eight languages, and with --link every fourth request a /link of a
short sentence. Reports requests/s, p50/p99 latency, errors by status, and whether there were no
errors at concurrency ≤ the server's --queue (beyond it, 429 is the designed answer). With
--retry-after, a client answered 429 waits as `Retry-After` says and sends the request again (the
retries are counted, the latency includes the wait). With --slow-clients N, N more sockets trickle
one header byte a second through every run (a slowloris): the table says how many the server
still holds at the end. The server's RSS is read before and after each run.
Appends a section to benchmarks/log/serving.md (and regenerates BENCHMARKS.md) unless --no-write.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import random
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from report import arguments, commit, machine, publish

MENTIONS = [
    "type 2 diabetes", "diabetes mellitus", "high blood pressure", "hypertension", "heart attack",
    "myocardial infarction", "asthma", "chronic obstructive pulmonary disease", "breast cancer",
    "lung carcinoma", "Alzheimer's disease", "Parkinson disease", "rheumatoid arthritis", "migraine",
    "hepatitis B", "tuberculosis", "pneumonia", "chronic kidney disease", "atrial fibrillation", "stroke",
    "diabetes mellitus tipo 2", "hipertensión arterial", "infarto de miocardio", "cáncer de mama",
    "insuffisance cardiaque", "maladie de Parkinson", "Herzinfarkt", "Lungenentzündung", "Bluthochdruck",
    "ipertensione", "diabete", "糖尿病", "高血压", "心肌梗死", "肺炎", "糖尿病性腎症", "高血圧", "喘息",
    "סוכרת", "יתר לחץ דם",
]
SENTENCES = [
    ("A patient with type 2 diabetes and hypertension was admitted after a heart attack.", "en"),
    ("Asthma and chronic obstructive pulmonary disease share symptoms.", "en"),
    ("El paciente tiene diabetes mellitus tipo 2 e hipertensión arterial.", "es"),
    ("Le patient souffre d'une insuffisance cardiaque et d'un diabète.", "fr"),
    ("Der Patient hatte einen Herzinfarkt und Bluthochdruck.", "de"),
    ("患者有2型糖尿病和高血压。", "zh"),
    ("לחולה יש סוכרת וגם יתר לחץ דם.", "he"),
    ("Migraine with aura raises the risk of stroke.", None),
]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_server(args: argparse.Namespace, log) -> tuple[subprocess.Popen, str, dict]:
    """`babelink serve` on a free port; returns it, its URL and its /health once it answers."""
    port = _free_port()
    command = [sys.executable, "-c", "from babelink.cli import main; main()", "serve", "--bundle", str(args.bundle),
               "--port", str(port), "--workers", str(args.workers), "--queue", str(args.queue),
               "--timeout", str(args.timeout)]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + args.startup_timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            log.seek(0)
            sys.exit(f"babelink serve exited with status {server.returncode}:\n{log.read().decode(errors='replace')}")
        try:
            return server, url, httpx.get(f"{url}/health", timeout=5).raise_for_status().json()
        except httpx.HTTPError:
            time.sleep(0.2)
    server.terminate()
    sys.exit(f"babelink serve did not answer /health within {args.startup_timeout:g} s")


def workload(requests: int, with_link: bool, seed: int = 0) -> list[tuple[str, dict]]:
    draw = random.Random(seed)
    payloads = []
    for number in range(requests):
        if with_link and number % 4 == 3:
            text, lang = draw.choice(SENTENCES)
            payloads.append(("/link", {"text": text} | ({"lang": lang} if lang else {})))
        else:
            payloads.append(("/normalize", {"mentions": [draw.choice(MENTIONS)], "top_k": 5}))
    return payloads


async def run_load(url: str, payloads: list[tuple[str, dict]], concurrency: int, timeout: float,
                   honour_retry_after: bool = False, slow_clients: int = 0) -> dict:
    """Send `payloads` from `concurrency` clients; latency of every answer, status counts, retries,
    and how many of `slow_clients` trickling sockets are still open at the end."""
    pending = iter(payloads)
    latencies: list[float] = []
    statuses: collections.Counter[str] = collections.Counter()
    retries = 0
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)

    async def client(session: httpx.AsyncClient) -> None:
        nonlocal retries
        for path, body in pending:
            started = time.perf_counter()
            for _ in range(MAX_RETRIES + 1):
                try:
                    response = await session.post(path, json=body)
                except httpx.HTTPError as error:
                    statuses[type(error).__name__] += 1
                    break
                if response.status_code != 429 or not honour_retry_after:
                    statuses[str(response.status_code)] += 1
                    break
                retries += 1
                await asyncio.sleep(float(response.headers.get("Retry-After", "1")))
            else:
                statuses["429"] += 1
            latencies.append(time.perf_counter() - started)

    host, port = url.removeprefix("http://").split(":")
    slow = [asyncio.create_task(_trickle(host, int(port))) for _ in range(slow_clients)]
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=timeout) as session:
        started = time.perf_counter()
        await asyncio.gather(*(client(session) for _ in range(concurrency)))
        seconds = time.perf_counter() - started
    held = sum(1 for task in slow if not task.done())  # still trickling when the run ended
    for task in slow:
        task.cancel()
    await asyncio.gather(*slow, return_exceptions=True)
    latencies.sort()
    return {"concurrency": concurrency, "requests": len(payloads), "seconds": seconds,
            "rate": len(payloads) / seconds, "p50": _percentile(latencies, 50), "p99": _percentile(latencies, 99),
            "errors": {status: count for status, count in sorted(statuses.items()) if status != "200"},
            "retries": retries, "slow held": held}


#: Times a client honouring Retry-After sends one request before counting the 429.
MAX_RETRIES = 20


async def _trickle(host: str, port: int) -> None:
    """A slowloris client: an unfinished request, one header byte a second, until the server
    closes the socket (returns) or the run ends (cancelled)."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(b"POST /normalize HTTP/1.1\r\nHost: probe\r\nX-Slow: ")
        while True:
            await writer.drain()
            try:
                await asyncio.wait_for(reader.read(1), timeout=1.0)
                return  # the server answered (an error status) or closed the socket
            except TimeoutError:
                writer.write(b"a")
    except (ConnectionError, OSError):
        return
    finally:
        writer.close()


def _rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:"))) / 1024


def _percentile(ordered: list[float], percent: float) -> float:
    return ordered[min(len(ordered) - 1, round(percent / 100 * (len(ordered) - 1)))]


def report(args: argparse.Namespace, health: dict, runs: list[dict]) -> str:
    bundle = health["bundle"]
    mix = "/normalize 3 : /link 1" if args.link else "/normalize only"
    lines = [f"## {time.strftime('%Y-%m-%d')} — serving load (commit `{commit()}`)", "",
             f"Command: `python benchmarks/serve_load.py {' '.join(sys.argv[1:])}` · machine: {machine()}", "",
             (f"`babelink serve` with {args.workers} worker(s), queue {args.queue}, timeout {args.timeout:g} s; bundle "
              f"`{Path(bundle['path']).name}` ({health['model']}, {bundle['kb']['concepts']:,} concepts, "
              f"{bundle['kb']['strings']:,} name strings). Each client sends its next request when the last is "
              f"answered; /normalize requests hold one mention (top 5), /link requests one short sentence; {mix}."), "",
             (f"Clients {'honour' if args.retry_after else 'do not honour'} `Retry-After` (a 429 is "
              f"{'waited out and retried' if args.retry_after else 'counted as an error'}); "
              f"{args.slow_clients} slow clients trickle headers through every run."), "",
             ("| clients | requests | requests/s | p50 ms | p99 ms | errors by status | retries | slow sockets held "
              "| server RSS MB start → end | no errors at ≤ queue |"),
             "|---:|---:|---:|---:|---:|---|---:|---:|---|---|"]
    for run in runs:
        errors = ", ".join(f"{status}: {count:,}" for status, count in run["errors"].items()) or "none"
        expected = (
            ("yes" if not run["errors"] else "**no**") if run["concurrency"] <= args.queue else "n/a (over queue)"
        )
        lines.append(f"| {run['concurrency']} | {run['requests']:,} | {run['rate']:,.1f} | {run['p50'] * 1000:,.1f} "
                     f"| {run['p99'] * 1000:,.1f} | {errors} | {run['retries']:,} | {run['slow held']} / "
                     f"{args.slow_clients} | {run['rss'][0]:,.0f} → {run['rss'][1]:,.0f} | {expected} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", type=Path, required=True, help="bundle directory to serve")
    parser.add_argument("--requests", type=int, default=2000, help="requests per concurrency level")
    parser.add_argument(
        "--concurrency", type=int, nargs="+", default=[8, 16, 32], help="concurrent clients, one run each"
    )
    parser.add_argument("--link", action="store_true", help="make every fourth request a /link of a short sentence")
    parser.add_argument("--workers", type=int, default=1, help="the server's --workers")
    parser.add_argument("--queue", type=int, default=32, help="the server's --queue")
    parser.add_argument("--timeout", type=float, default=30.0, help="the server's --timeout")
    parser.add_argument("--startup-timeout", type=float, default=900.0, help="seconds to wait for /health")
    parser.add_argument("--retry-after", action="store_true", help="clients wait out a 429 and send again")
    parser.add_argument("--slow-clients", type=int, default=0, help="slowloris sockets held through every run")
    args = arguments(parser.description, parser)
    with tempfile.TemporaryFile() as log:
        server, url, health = start_server(args, log)
        try:
            payloads = workload(args.requests, args.link)
            asyncio.run(run_load(url, payloads[:20], 1, args.timeout + 10))  # warm-up
            runs = []
            for concurrency in args.concurrency:
                before = _rss_mb(server.pid)
                runs.append(asyncio.run(run_load(url, payloads, concurrency, args.timeout + 10, args.retry_after,
                                                 args.slow_clients)))
                runs[-1]["rss"] = (before, _rss_mb(server.pid))
                print(f"{concurrency} clients: {runs[-1]['rate']:,.1f} requests/s, errors {runs[-1]['errors']}",
                      file=sys.stderr)
        finally:
            server.terminate()
            server.wait(30)
    publish(report(args, health, runs), not args.no_write, "serving")


if __name__ == "__main__":
    main()
