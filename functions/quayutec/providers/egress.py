"""Where an owner-supplied model address may point (design §5, issue 10 finding 3).

An ``openai-compatible`` agent's ``base_url`` comes from its owner, and the run sends the
company's key there and keeps (part of) the answer in the ledger. So the address must be
``https`` to a **public** address:

* at registration, :func:`url_problem` refuses a non-https URL and a host that is (or names) a
  loopback, link-local (169.254.0.0/16, the instance metadata address), private, unique-local,
  multicast, reserved or unspecified address, an IETF protocol assignment (192.0.0.0/24) or an
  IPv6 transition address carrying an IPv4 one (6to4, Teredo, NAT64); the host is read as the
  resolver reads it, so IPv4 in legacy spellings (``0177.0.0.1``, ``2130706433``, ``127.1``) is
  that address, not a name;
* at request time, :func:`pinned_http_client` resolves the host, refuses it unless *every*
  address is public, and makes the connection go to the address it checked (a network backend
  that connects to the pinned IP while TLS still verifies the URL's host name), so a DNS answer
  that changes between the check and the connection (DNS rebinding) cannot redirect it. Proxies
  from the environment are ignored for these requests.

Loopback (and plain ``http`` to loopback) is allowed only where the deps say so
(``Deps.allow_loopback_model_urls``): the local engine's stacks pass it to the deps they build
(through :func:`quayutec.seams.hook_deps`); no deployed function's setting can turn it on.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

_LOCAL_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")

Resolver = Callable[[str, int], list[str]]


class AddressRefused(ValueError):
    """The owner's address is not an https address of a public host."""


#: A host label a resolver reads as a number (decimal, octal or ``0x`` hex): a host whose last
#: label is one is an IPv4 address in some spelling, or no valid host at all.
_NUMERIC_LABEL = re.compile(r"^(0x[0-9a-f]*|[0-9]+)$", re.IGNORECASE)
#: IETF protocol assignments (192.0.0.0/24: e.g. 192.0.0.8, the IPv4 dummy address), refused whole.
_IETF_PROTOCOL = ipaddress.ip_network("192.0.0.0/24")
#: NAT64 prefixes: the address is translated to the IPv4 address in its last 32 bits.
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address ``text`` names as the resolver reads it (``None``: a name, looked up by DNS).
    Besides the standard spellings, IPv4 in the legacy forms ``inet_aton`` (and so
    ``getaddrinfo``) accepts: ``0251.0376.0251.0376`` (octal), ``2130706433``, ``0x7f000001``,
    ``127.1``, ``0``. Raises ``ValueError`` for a host no resolver should be given: control
    characters or whitespace, or a numeric last label that is no IPv4 address (``08.1.1.1``)."""
    host = text.strip("[]").split("%", 1)[0]
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        addr = None
    if addr is None:
        if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in text):
            raise ValueError("the host has whitespace or control characters")
        try:
            addr = ipaddress.IPv4Address(socket.inet_aton(host))
        except (OSError, ValueError):
            if _NUMERIC_LABEL.match(host.rstrip(".").rsplit(".", 1)[-1]):
                raise ValueError("the host is numeric but no IPv4 address") from None
            return None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    return addr


def address_problem(addr: ipaddress.IPv4Address | ipaddress.IPv6Address, allow_loopback: bool) -> str | None:
    """Why ``addr`` may not be called (``None``: a public address, or loopback when allowed).
    The one check of registration (a literal address) and of request time (every DNS answer).
    IPv6 transition addresses that carry an IPv4 address (6to4, Teredo, NAT64) are refused
    whatever they carry: the packets may end at that IPv4 address."""
    if isinstance(addr, ipaddress.IPv6Address):
        if addr.ipv4_mapped is not None:
            return address_problem(addr.ipv4_mapped, allow_loopback)
        if addr.sixtofour is not None:
            return f"{addr} is a 6to4 address (2002::/16, carrying {addr.sixtofour})"
        if addr.teredo is not None:
            return f"{addr} is a Teredo address (2001::/32, carrying {addr.teredo[1]})"
        if any(addr in net for net in _NAT64):
            return f"{addr} is a NAT64 address (carrying {ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF)})"
    elif addr in _IETF_PROTOCOL:
        return f"{addr} is an IETF protocol assignment (192.0.0.0/24)"
    if addr.is_loopback:
        return None if allow_loopback else f"{addr} is a loopback address"
    if addr.is_link_local:
        return f"{addr} is a link-local address (e.g. the instance metadata service)"
    if addr.is_private:
        return f"{addr} is a private address"
    if addr.is_multicast or addr.is_reserved or addr.is_unspecified or not addr.is_global:
        return f"{addr} is not a public address"
    return None


def url_problem(url: str, *, allow_loopback: bool = False) -> str | None:
    """Why ``url`` may not be an owner's model address, checked without DNS (``None``: fine so
    far; the resolved addresses are checked again at request time)."""
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower().rstrip(".")
        port = parts.port  # a malformed port raises here
    except ValueError:
        return "base_url is not a valid URL"
    if port == 0:  # no server listens on port 0: a typo, refused now rather than at each request
        return "base_url port must be 1 to 65535"
    if parts.username or parts.password:
        return "base_url must not carry credentials"
    if not host:
        return "base_url has no host"
    try:
        addr = _ip(host)
    except ValueError as exc:
        return f"base_url host {host!r} is not valid: {exc}"
    loopback = (addr is not None and addr.is_loopback) or host in _LOCAL_NAMES or host.endswith(".localhost")
    plain_ok = parts.scheme == "http" and allow_loopback and (loopback or addr is None)  # a name: after DNS
    if parts.scheme != "https" and not plain_ok:
        return "base_url must be an https:// address"
    spelt = f"{host} reads as {addr}: " if addr is not None and host.strip("[]") != str(addr) else ""
    if loopback and not allow_loopback:
        what = f"{host} is a loopback address" if addr is None else f"{spelt}{address_problem(addr, False)}"
        return f"base_url must be a public address: {what}"
    if addr is not None:
        problem = address_problem(addr, allow_loopback)
        if problem:
            return f"base_url must be a public address: {spelt}{problem}"
    return None


def system_resolver(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def checked_address(url: str, *, allow_loopback: bool = False, resolver: Resolver | None = None) -> str:
    """The IP address the request to ``url`` is to connect to, after DNS resolution; raises
    :class:`AddressRefused` when the URL or any address it resolves to is refused."""
    problem = url_problem(url, allow_loopback=allow_loopback)
    if problem:
        raise AddressRefused(problem)
    parts = urlsplit(url)
    host = (parts.hostname or "").rstrip(".")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    plain = parts.scheme != "https"  # allowed by url_problem only towards loopback, locally
    literal = _ip(host)  # a valid host: url_problem said so
    if literal is not None:
        return str(literal)
    try:
        addresses = (resolver or system_resolver)(host, port)
    except (OSError, UnicodeError):
        raise AddressRefused(f"base_url host {host!r} does not resolve") from None
    if not addresses:
        raise AddressRefused(f"base_url host {host!r} does not resolve")
    for text in addresses:
        try:
            addr = _ip(text)
        except ValueError:
            addr = None
        problem = "not an IP address" if addr is None else address_problem(addr, allow_loopback)
        if problem or addr is None:
            raise AddressRefused(f"base_url host {host!r} resolves to a refused address: {problem}")
        if plain and not addr.is_loopback:
            raise AddressRefused("base_url must be an https:// address")
    return str(_ip(addresses[0]))


def pinned_http_client(
    url: str, *, timeout_s: float, allow_loopback: bool = False, resolver: Resolver | None = None
) -> Any:
    """An ``httpx`` client (the one the OpenAI SDK is built on) whose connections to ``url``'s host
    go to the address :func:`checked_address` approved. Raises :class:`AddressRefused`."""
    import httpcore2
    import httpx2

    address = checked_address(url, allow_loopback=allow_loopback, resolver=resolver)
    checked_host = (urlsplit(url).hostname or "").rstrip(".").strip("[]").lower()

    class _Pinned(httpcore2.SyncBackend):
        def connect_tcp(
            self,
            host: str,
            port: int,
            timeout: float | None = None,
            local_address: str | None = None,
            socket_options: Any = None,
        ) -> Any:
            if host.strip("[]").lower().rstrip(".") != checked_host:
                raise httpcore2.ConnectError("connection to another host than the checked one refused")
            return super().connect_tcp(
                address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
            )

    transport = httpx2.HTTPTransport(retries=0)
    transport._pool._network_backend = _Pinned()  # the pool's only connector: every connection is pinned
    return httpx2.Client(transport=transport, timeout=timeout_s, trust_env=False, follow_redirects=False)
