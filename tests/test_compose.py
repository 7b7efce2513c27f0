"""docker-compose.yml and Dockerfile, checked without Docker (none runs on the dev machines):
every service's command names a real module, command and setting of this project."""

import importlib
import re
import tomllib

import yaml

from core.settings import Settings
from tests.conftest import ROOT

COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
OUR_IMAGE = "gemmwatch:latest"
SETTING_NAMES = {f.validation_alias for f in Settings.model_fields.values() if f.validation_alias}


def ours() -> dict:
    return {name: s for name, s in SERVICES.items() if s.get("image") == OUR_IMAGE}


def test_the_services_the_deployment_needs_are_there():
    assert {"postgres", "redis", "migrate", "api", "worker-gpu0"} <= set(SERVICES)
    assert any(v.startswith("pgdata:") for v in SERVICES["postgres"]["volumes"])
    assert SERVICES["redis"]["command"][:1] == ["redis-server"]
    assert "monitoring" in SERVICES["flower"]["profiles"]  # optional


def test_migrate_runs_first_and_api_and_workers_wait_for_it():
    assert SERVICES["migrate"]["command"] == ["alembic", "upgrade", "head"]
    assert (ROOT / "alembic.ini").exists() and (ROOT / "migrations" / "env.py").exists()
    for name, service in ours().items():
        if name != "migrate":
            assert service["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}, name


def test_the_api_command_is_a_real_cli_command_serving_the_real_app_and_has_a_healthcheck():
    from typer.main import get_command

    from api.serve import APP
    from cli.main import app as cli_app

    cmd = SERVICES["api"]["command"]
    assert cmd[:2] == ["gemmwatch", "serve"] and cmd[1] in get_command(cli_app).commands
    assert int(SERVICES["api"]["environment"]["WEB_CONCURRENCY"]) >= 2  # several server processes
    module, _, attr = APP.partition(":")
    app = getattr(importlib.import_module(module), attr)()
    assert "/healthz" in app.openapi()["paths"]
    assert "/healthz" in " ".join(SERVICES["api"]["healthcheck"]["test"])


def test_each_worker_owns_one_gpu_and_runs_a_real_cli_command():
    from typer.main import get_command

    from cli.main import app as cli_app

    cli = get_command(cli_app)
    workers = {n: s for n, s in SERVICES.items() if n.startswith("worker")}
    assert workers
    for name, service in workers.items():
        cmd = service["command"]
        assert cmd[:2] == ["gemmwatch", "worker"], name
        sub = cli.commands["worker"]
        ctx = sub.make_context("worker", cmd[2:])  # raises on an unknown option
        gpu = str(ctx.params["gpu"])
        devices = service["deploy"]["resources"]["reservations"]["devices"]
        assert devices[0]["capabilities"] == ["gpu"] and devices[0]["device_ids"] == [gpu], name
        assert service["environment"]["CUDA_VISIBLE_DEVICES"] == gpu


def cli_envvars() -> set[str]:
    """Environment variables the `gemmwatch` commands' options read (WEB_CONCURRENCY for serve)."""
    from typer.main import get_command

    from cli.main import app as cli_app

    commands = get_command(cli_app).commands.values()
    return {var for cmd in commands for p in cmd.params for var in ([p.envvar] if isinstance(p.envvar, str) else p.envvar or [])}


def test_every_environment_variable_is_a_real_setting():
    allowed = SETTING_NAMES | {"CUDA_VISIBLE_DEVICES"} | cli_envvars()
    for name, service in ours().items():
        for var in service.get("environment", {}):
            assert var in allowed, f"{name}: {var} is not a gemmwatch setting"
    assert {"DATABASE_URL", "BROKER_URL"} <= SETTING_NAMES


def test_configuration_is_documented_in_the_readme():
    readme = (ROOT / "README.md").read_text()
    for var in ("DATABASE_URL", "BROKER_URL", "GEMMWATCH_AUTH_WRITES", "GEMMWATCH_HEARTBEAT_STALE_S"):
        assert var in readme
    assert "docker compose" in readme and "second GPU node" in readme


def test_the_image_runs_as_a_non_root_user_on_a_cuda_runtime():
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^FROM nvidia/cuda:[\w.-]*runtime", dockerfile, re.M)
    user = re.findall(r"^USER (\S+)", dockerfile, re.M)
    assert user and user[-1] not in ("root", "0")
    assert "'.[gpu]'" in dockerfile  # CuPy in the image


def test_the_image_copies_every_package_the_project_installs():
    """The folders come from pyproject.toml's package list and the tree, not from a list kept here:
    an image without core/ (the one every other package imports) once built and could not import
    api.app."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    wanted = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = sorted({p.rstrip("*") for p in wanted} & {d.name for d in ROOT.iterdir() if (d / "__init__.py").is_file()})
    assert "core" in packages and "api" in packages
    missing = [p for p in packages if not re.search(rf"^COPY (?:.* )?{p}(?: .*)? {p}/?$|^COPY {p} {p}$", dockerfile, re.M)]
    assert not missing, f"the Dockerfile does not copy {missing}"


def test_the_image_can_build_kernels_with_nvcc():
    """A `"compiler": "nvcc"` kernel needs a host compiler beside the nvcc wheel ('.[gpu]' brings it)."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"apt-get install[^\n]*(?:\\\n[^\n]*)*\bg\+\+", dockerfile)
