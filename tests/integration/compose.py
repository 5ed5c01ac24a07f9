"""docker-compose.yml's services run here the way compose runs them, on a machine without a
container engine: each service's command and flags exactly as written, against the files
it mounts.

Each service gets a directory that stands for its container's root. A bind mount
(`./services/config:/etc/ykbus`) is a copy of the repository's files there; a named volume
is a directory of this run, shared by every service that mounts it. In the copies, the
container's paths become paths under the service's root, the service host names
(`nats://nats:4222`) the URL of the nats-server this run started, and a published port a
free loopback port: what a container sees, seen from here. A wrong flag, a path the image
does not have, a file a volume does not hold: each fails as it would under compose.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).parents[2]
TEXT_SUFFIXES = (".yaml", ".yml", ".conf")


class Compose:
    def __init__(self, tmp: Path, compose_file: Path = ROOT / "docker-compose.yml") -> None:
        self.tmp = tmp
        self.spec: dict[str, Any] = yaml.safe_load(compose_file.read_text())
        self.services: dict[str, Any] = self.spec["services"]
        self.hosts: dict[str, str] = {}  # service host name -> the URL it answers on here
        self.ports: dict[int, int] = {}  # a container port a service publishes -> the port here
        self.routes: dict[str, int] = {}  # a NATS cluster member's host name -> its route port here

    def root(self, service: str) -> Path:
        return self.tmp / "services" / service

    def volume(self, name: str) -> Path:
        path = self.tmp / "volumes" / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def mounts(self, service: str) -> list[tuple[str, str, bool]]:
        """(source, container path, read only) of each of the service's volumes."""
        out = []
        for spec in self.services[service].get("volumes", []):
            parts = spec.split(":")
            out.append((parts[0], parts[1], len(parts) > 2 and parts[2] == "ro"))
        return out

    def translate(self, service: str, text: str) -> str:
        """A file's text as the service would read it, seen from here."""
        for _, target, _ in sorted(self.mounts(service), key=lambda m: -len(m[1])):
            text = re.sub(rf"(?<![\w./-]){re.escape(target)}(?=[/\"'\s]|$)", str(self.root(service)) + target, text,
                          flags=re.M)
        for host, url in self.hosts.items():
            text = text.replace(f"nats://{host}:4222", url)
        for host, port in self.routes.items():
            text = text.replace(f"nats-route://{host}:6222", f"nats-route://127.0.0.1:{port}")
        if service in self.routes:  # its own cluster listener
            text = text.replace('listen: "0.0.0.0:6222"', f'listen: "127.0.0.1:{self.routes[service]}"')
        for there, here in self.ports.items():
            text = re.sub(rf"\bport: {there}\b", f"port: {here}", text)
        return text.replace("host: 0.0.0.0", "host: 127.0.0.1")  # a published port, on loopback here

    def prepare(self, service: str) -> Path:
        """The service's root: its bind mounts copied (text files translated), its named
        volumes linked."""
        root = self.root(service)
        for source, target, _ in self.mounts(service):
            where = root / target.lstrip("/")
            where.parent.mkdir(parents=True, exist_ok=True)
            if where.exists() or where.is_symlink():
                continue
            if not source.startswith("."):  # a named volume
                where.symlink_to(self.volume(source), target_is_directory=True)
                continue
            src = ROOT / source
            files = [src] if src.is_file() else [p for p in src.rglob("*") if p.is_file()]
            for f in files:
                dest = where if src.is_file() else where / f.relative_to(src)
                dest.parent.mkdir(parents=True, exist_ok=True)
                if f.suffix in TEXT_SUFFIXES:
                    dest.write_text(self.translate(service, f.read_text()))
                else:
                    shutil.copy(f, dest)
        return root

    def argv(self, service: str) -> list[str]:
        """The service's command as this machine runs it: `ykbus ...` as this Python's
        module, an image's command as that program, paths and hosts translated."""
        svc = self.services[service]
        self.prepare(service)
        args = [self.translate(service, a) for a in svc["command"]]
        if "image" in svc:  # only nats images are used: their entry point is nats-server
            from ykbus.bus.server import find_binary

            assert svc["image"].startswith("nats:"), svc["image"]
            return [find_binary(), *args]
        assert args[0] == "ykbus", f"{service} must run the ykbus command"
        return [sys.executable, "-m", "ykbus.cli", *args[1:]]

    def start(self, service: str, *extra: str, env: dict[str, str] | None = None) -> subprocess.Popen:
        return subprocess.Popen([*self.argv(service), *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=env)

    def run(self, service: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(self.argv(service), capture_output=True, text=True, timeout=timeout)


def image_directories(dockerfile: Path = ROOT / "services" / "Dockerfile") -> tuple[str, dict[str, str]]:
    """The final stage's user and the directories its RUN lines make, with their owner
    (`mkdir -p A B && chown U A B`): what a new named volume mounted there takes as owner."""
    stages = dockerfile.read_text().split("\nFROM ")
    final = stages[-1]
    user = "root"
    dirs: dict[str, str] = {}
    for line in final.splitlines():
        line = line.strip()
        if line.startswith("USER "):
            user = line.split()[1]
        if line.startswith("RUN "):
            for step in line[4:].split("&&"):
                words = step.split()
                if words[:2] == ["mkdir", "-p"]:
                    dirs.update({d: "root" for d in words[2:]})
                elif words[:1] == ["chown"]:
                    dirs.update({d: words[1] for d in words[2:]})
    return user, dirs
