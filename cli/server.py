"""Which gemmwatch server a command talks to, the record `gemmwatch up` leaves of where it serves,
and a client to it with the command's token (`api_client`).

The order: --server, then $GEMMWATCH_SERVER, then the URL that a running `gemmwatch up` wrote
to the data folder (so `make up PORT=8801` then `gemmwatch submit` reaches port 8801), then
http://127.0.0.1:8000. `gemmwatch ci` reads that record only when told to (`--local`): in CI the
data folder, `.gemmwatch` of the working directory, is the checked-out tree's, a pull request's.
"""

import os
import socket
from pathlib import Path

import httpx
import typer
from rich.console import Console
from cli.markup import colored

DEFAULT_SERVER = "http://127.0.0.1:8000"
SERVER_RECORD_FILE = "server"  # in the data folder, beside the local token
SERVER_HELP = ("base URL of the gemmwatch API (default: $GEMMWATCH_SERVER, else where `gemmwatch up` "
               f"serves, else {DEFAULT_SERVER})")


def server_record_path() -> Path:
    # Imported here: `gemmwatch --help` and the HTTP-only commands start without it (start-up time).
    from core.settings import settings

    return settings.data_dir / SERVER_RECORD_FILE


def find_server(explicit: str | None) -> str:
    if explicit:
        return explicit.rstrip("/")
    if os.environ.get("GEMMWATCH_SERVER"):
        return os.environ["GEMMWATCH_SERVER"].rstrip("/")
    record = server_record_path()
    if record.exists() and (recorded := record.read_text().strip()):
        return recorded
    return DEFAULT_SERVER


class UntrustedRecord(Exception):
    pass


def find_ci_server(explicit: str | None, local: bool, command: str = "gemmwatch ci") -> str:
    """The server of a command that runs in CI (`command`): --server or $GEMMWATCH_SERVER, the data
    folder's record only with --local; where a record exists without --local, refused, since the
    token would follow it."""
    record = server_record_path()
    if local and not (explicit or os.environ.get("GEMMWATCH_SERVER")) and not record.exists():
        raise UntrustedRecord(
            f"--local reads the server and token `gemmwatch up` recorded in its data folder, and {record} holds "
            "none: run this from the folder where `make up` (`gemmwatch up`) runs, or set GEMMWATCH_DATA_DIR to "
            "its data folder")
    if explicit or os.environ.get("GEMMWATCH_SERVER") or local:
        return find_server(explicit)
    if record.exists():
        raise UntrustedRecord(
            f"a server is recorded in {record}, which {command} does not trust: in CI it is a file of the"
            " checked-out tree. Give --server or $GEMMWATCH_SERVER, or --local to use this machine's `gemmwatch up`")
    return DEFAULT_SERVER


def trusted_server(explicit: str | None, local: bool, command: str = "gemmwatch ci") -> str:
    """find_ci_server for a command that runs in CI (`ci`, `run --post`); exit 2 saying why not."""
    try:
        return find_ci_server(explicit, local, command)
    except UntrustedRecord as exc:
        Console(stderr=True).print(colored("red", str(exc)), highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


LOCAL_HELP = ("use the server and token `gemmwatch up` recorded in the data folder (.gemmwatch here): for this"
              " machine's own install, never in CI")


def local_url(host: str, port: int) -> str:
    """The URL a client on this machine uses for a server listening on host:port."""
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


def port_taken(host: str, port: int) -> bool:
    """Whether something listens on host:port already (another `gemmwatch up`, another program):
    bound as uvicorn binds (SO_REUSEADDR, so a port a stopped server left in TIME_WAIT is free)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return True
    return False


def record_server(url: str) -> Path:
    path = server_record_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(url + "\n")
    return path


def forget_server(url: str) -> None:
    """Remove the record on the way out, unless another `gemmwatch up` has written its own since."""
    path = server_record_path()
    try:
        if path.read_text().strip() == url:
            path.unlink()
    except FileNotFoundError:
        pass


LOCAL_TOKEN_FILE = "token"  # in the data folder: the token `gemmwatch up` made for this machine


def local_token_path():
    # Imported here: `gemmwatch --help` and the HTTP-only commands start without it (start-up time).
    from core.settings import settings

    return settings.data_dir / LOCAL_TOKEN_FILE


def find_token(explicit: str | None, from_data_dir: bool = True) -> str | None:
    """--token, else $GEMMWATCH_TOKEN, else (unless told not to) the token `gemmwatch up` left in
    the data folder."""
    if explicit:
        return explicit
    if os.environ.get("GEMMWATCH_TOKEN"):
        return os.environ["GEMMWATCH_TOKEN"]
    path = local_token_path()
    return path.read_text().strip() if from_data_dir and path.exists() else None


def api_client(server: str, token: str | None, from_data_dir: bool = True) -> httpx.Client:
    found = find_token(token, from_data_dir)
    headers = {"Authorization": f"Bearer {found}"} if found else {}
    return httpx.Client(base_url=server, timeout=30, headers=headers)
