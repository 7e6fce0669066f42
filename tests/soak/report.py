"""The run's report: printed, and written as report.json and report.md in the run's folder."""
import collections
import json
import os
import time


def counts(ledger, load_workers):
    kinds = collections.Counter(p["kind"] for p in ledger.published.values())
    confirmed = collections.Counter(ledger.published[i]["kind"] for i in ledger.confirmed)
    closes = collections.Counter(f"{e['kind']} {e['code']}" if e["code"] else e["kind"] for e in ledger.events)
    by_name = {w.name: w for w in load_workers}
    return {
        "published": len(ledger.published), "published_by_kind": dict(kinds),
        "confirmed": len(ledger.confirmed), "confirmed_by_kind": dict(confirmed),
        "nacked": len(ledger.nacked), "returned_unroutable": len(ledger.returned),
        "deliveries": len(ledger.deliveries),
        "redeliveries": sum(1 for d in ledger.deliveries if d["redelivered"]),
        "rejected": len(ledger.settled_away),
        "churn_cycles": sum(getattr(by_name.get(n), "cycle", 0) for n in ("churn-a", "churn-b")),
        "connections_churned": getattr(by_name.get("conn-churn"), "count", 0),
        "sockets_dropped": getattr(by_name.get("socket-dropper"), "dropped", 0),
        "consumer_processes_killed": getattr(by_name.get("process-killer"), "killed", 0),
        "events_by_kind_and_code": dict(closes),
    }


def write(out_dir, summary, checks, windows, ledger, flatness, samples, t0):
    ok = all(c["ok"] for c in checks)
    document = {"ok": ok, "summary": summary, "checks": checks, "fault_windows": windows,
                "events": ledger.events, "resources": flatness}
    with open(os.path.join(out_dir, "report.json"), "w") as f:
        json.dump(document, f, indent=1, default=str)
    with open(os.path.join(out_dir, "samples.json"), "w") as f:
        json.dump(samples, f)
    with open(os.path.join(out_dir, "ledger.json"), "w") as f:  # every publish and delivery, for digging
        json.dump({"published": ledger.published, "confirmed": ledger.confirmed, "nacked": ledger.nacked,
                   "returned": ledger.returned, "deliveries": ledger.deliveries,
                   "settled_away": ledger.settled_away, "intended": ledger.intended}, f)
    markdown = render_markdown(document, t0)
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write(markdown)
    return ok, markdown


def _clock(t, t0):
    return f"+{t - t0:.1f}s" if t else "-"


def render_markdown(doc, t0):
    s = doc["summary"]
    lines = [f"# Soak report: {'PASS' if doc['ok'] else 'FAIL'}", "",
             f"Command: `{s['command']}`  ",
             f"Started {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(t0))}, load for {s['minutes']} min, "
             f"seed {s['seed']}, grace after each fault {s['grace_s']} s, wall time {s['wall_s']:.0f} s.", "",
             "## Checks", "", "| Check | Result | Count | Detail |", "|---|---|---|---|"]
    for c in doc["checks"]:
        lines.append(f"| {c['name']} | {'ok' if c['ok'] else '**FAIL**'} | {c['count']} | {c['summary']} |")
    lines += ["", "## Load", "", "| What | Number |", "|---|---|"]
    for key, value in s["counts"].items():
        if value is not None:
            lines.append(f"| {key} | {value} |")
    lines += ["", "## Faults", "", "| Kind | Target | Planned | Start | End | Notes |", "|---|---|---|---|---|---|"]
    for w in doc["fault_windows"]:
        lines.append(f"| {w['kind']} | {w['target']} | +{w['planned_at']}s ({w['duration']} s) | "
                     f"{_clock(w['start'], t0)} | {_clock(w['end'], t0)} | {'; '.join(w['notes'])} |")
    lines += ["", "## Processes (RSS, fds)", "",
              "| Process | PID | Life | Samples | RSS first / max (MiB) | fds max | Judged | Flat |",
              "|---|---|---|---|---|---|---|---|"]
    for e in doc["resources"]:
        lines.append(f"| {e['role']} | {e['pid']} | {e['life_s']} s | {e['samples']} | "
                     f"{e['rss_kib_first'] / 1024:.0f} / {e['rss_kib_max'] / 1024:.0f} | {e['fds_max']} | "
                     f"{'yes' if e['judged'] else 'no'} | {e.get('flat', '-')} |")
    failing = [c for c in doc["checks"] if not c["ok"]]
    if failing:
        lines += ["", "## What failed", ""]
        for c in failing:
            lines.append(f"### {c['name']} ({c['count']})")
            lines.append("")
            for item in c["items"]:
                lines.append(f"- `{json.dumps(item, default=str)[:600]}`")
            lines.append("")
    tolerated = [c for c in doc["checks"] if c.get("inside_fault_windows")]
    for c in tolerated:
        lines += ["", f"## {c['name']}: inside fault windows (not failed)", ""]
        lines += [f"- `{json.dumps(item, default=str)[:400]}`" for item in c["inside_fault_windows"]]
    lines += ["", "## Events (closes, refusals, failures) by time", ""]
    for e in doc["events"][:200]:
        lines.append(f"- {_clock(e['t'], t0)} {e['who']} on {e['replica']}: {e['kind']} {e['code'] or ''} {e['text'][:160]}")
    return "\n".join(lines) + "\n"
