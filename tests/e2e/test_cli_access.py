"""The CLI with access control, as a user runs it: ingest two tenants' folders with the
same paths (``--tenant``), look up for each (``--tenant/--user/--group``), list the
audit by tenant, and verify a citation of the other tenant's document (forbidden)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

CLI = str(Path(sys.executable).with_name("lookup-knowledge"))


def _run(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CLI, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300, check=False
    )


def _folder(root: Path, tenant: str) -> Path:
    folder = root / tenant / "kb"
    folder.mkdir(parents=True)
    (folder / "dns.md").write_text(
        f"# DNS\n\nInternal zones resolve through the resolver ({tenant}-marker).\n", "utf-8"
    )
    (folder / f"{tenant}-only.md").write_text(
        f"# Only {tenant}\n\nThe resolver plan of {tenant} ({tenant}-marker).\n", "utf-8"
    )
    return folder


def test_two_tenants_through_the_cli(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOKUP_KNOWLEDGE_")}
    env.update(
        {
            "LOOKUP_KNOWLEDGE_DATA_DIR": str(tmp_path / "data"),
            "LOOKUP_KNOWLEDGE_EMBEDDER__PROVIDER": "hashing",
            "LOOKUP_KNOWLEDGE_ACCESS__MODE": "enforced",
            "LOOKUP_KNOWLEDGE_RAG__MIN_RELEVANCE": "0",
        }
    )
    for tenant in ("acme", "globex"):
        done = _run(env, tmp_path, "ingest", str(_folder(tmp_path, tenant)), "--tenant", tenant)
        assert done.returncode == 0, done.stderr

    done = _run(
        env,
        tmp_path,
        "lookup",
        "resolver plan",
        "--session",
        "s-acme",
        "--tenant",
        "acme",
        "--user",
        "alice",
        "--group",
        "staff",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    blocks = json.loads(done.stdout)["evidenceBlocks"]
    assert blocks
    assert all("acme-marker" in b["content"] for b in blocks)

    anonymous = _run(env, tmp_path, "lookup", "resolver plan", "--json")
    assert anonymous.returncode == 0, anonymous.stderr
    assert json.loads(anonymous.stdout)["found"] is False  # no public documents

    listed = _run(env, tmp_path, "audit", "list", "--tenant", "acme", "--traffic", "all", "--json")
    assert listed.returncode == 0, listed.stderr
    items = json.loads(listed.stdout)["items"]
    assert [(i["principal_tenant"], i["principal_user"]) for i in items] == [("acme", "alice")]
    shown = _run(env, tmp_path, "audit", "show", items[0]["id"], "--json")
    evidence = json.loads(shown.stdout)["evidence"]
    assert evidence
    assert {e["row_tenant"] for e in evidence} == {"acme"}  # which tenant's copy was shown
    table = _run(env, tmp_path, "audit", "show", items[0]["id"])
    assert table.returncode == 0, table.stderr
    assert "row tenant" in table.stdout
    stats = _run(env, tmp_path, "audit", "stats", "--tenant", "globex", "--json")
    assert json.loads(stats.stdout)["count"] == 0

    verdict = _run(
        env,
        tmp_path,
        "audit",
        "verify",
        "kb/globex-only.md#chunk-0",
        "--session",
        "s-acme",
        "--group",
        "staff",
        "--json",
    )
    assert verdict.returncode == 1
    assert json.loads(verdict.stdout)["forbidden"] == ["kb/globex-only.md#chunk-0"]

    for bad in (["--tenant", " acme"], ["--user", "u"], ["--tenant", "a\tb"]):
        refused = _run(env, tmp_path, "lookup", "x", *bad)
        assert refused.returncode == 2, (bad, refused.stderr)
    refused = _run(env, tmp_path, "ingest", str(tmp_path / "acme"), "--allowed-group", "hr")
    assert refused.returncode == 2  # groups without a tenant
