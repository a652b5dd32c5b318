"""Owner model addresses (design §5), security probe: a host is read the way the resolver reads it,
so IPv4 in legacy spellings (octal, one decimal or hex number, fewer than four parts) is refused
at registration like its dotted form; 6to4, Teredo, NAT64 and 192.0.0.0/24 addresses are refused
at registration and again at request time, by the same check."""

from __future__ import annotations

import ipaddress

import pytest

from quayutec.providers.egress import AddressRefused, address_problem, checked_address, url_problem

pytestmark = pytest.mark.unit  # no AWS, no network: make unit

# (host as written in the URL, the address the resolver reads)
LEGACY_IPV4 = [
    ("0251.0376.0251.0376", "169.254.169.254"),  # octal: the instance metadata address
    ("0xa9.0xfe.0xa9.0xfe", "169.254.169.254"),
    ("2852039166", "169.254.169.254"),
    ("2130706433", "127.0.0.1"),
    ("0x7f000001", "127.0.0.1"),
    ("0X7F000001", "127.0.0.1"),
    ("0177.0.0.1", "127.0.0.1"),
    ("127.1", "127.0.0.1"),
    ("127.0.1", "127.0.0.1"),
    ("0", "0.0.0.0"),
    ("012.1", "10.0.0.1"),
    ("10.0xffff01", "10.255.255.1"),
    ("0300.0250.1.1", "192.168.1.1"),
]

TRANSITION_AND_IETF = [
    "2002:a9fe:a9fe::1",  # 6to4 carrying 169.254.169.254
    "2002:7f00:1::",  # 6to4 carrying 127.0.0.1
    "2002:0a00:0001::1",  # 6to4 carrying 10.0.0.1
    "2002:5db8:d822::1",  # 6to4 carrying a public address: refused all the same
    "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo
    "2001:0:5db8:d822:0:f5ff:5601:5601",  # Teredo, client 169.254.169.254 (obfuscated)
    "64:ff9b::a9fe:a9fe",  # NAT64 carrying 169.254.169.254
    "64:ff9b:1::a00:1",  # local-use NAT64 carrying 10.0.0.1
    "192.0.0.8",  # IETF protocol assignments: the IPv4 dummy address
    "192.0.0.9",
    "192.0.0.10",
    "192.0.0.170",
    "192.0.0.255",
]


def _url(host: str) -> str:
    return f"https://{'[' + host + ']' if ':' in host else host}/latest/meta-data/"


@pytest.mark.parametrize(("host", "address"), LEGACY_IPV4)
@pytest.mark.parametrize("allow_loopback", [False, True])
def test_legacy_ipv4_spellings_are_refused_at_registration(host: str, address: str, allow_loopback: bool) -> None:
    problem = url_problem(_url(host), allow_loopback=allow_loopback)
    if allow_loopback and ipaddress.ip_address(address).is_loopback:
        assert problem is None  # the local stack's setting: the same as 127.0.0.1
        assert checked_address(_url(host), allow_loopback=True) == address  # connects to what was checked
    else:
        assert problem and address in problem, (host, problem)


@pytest.mark.parametrize(("host", "address"), LEGACY_IPV4)
def test_legacy_ipv4_spellings_are_refused_at_request_time_without_dns(host: str, address: str) -> None:
    def resolver(name: str, port: int) -> list[str]:
        raise AssertionError(f"{name} is an address, not a name to look up")

    with pytest.raises(AddressRefused, match=address.replace(".", r"\.")):
        checked_address(_url(host), resolver=resolver)


@pytest.mark.parametrize("host", ["08.1.1.1", "1.2.3.4.5", "example.0x", "256.256.256.256.", "example.123"])
def test_a_numeric_host_that_is_no_address_is_refused(host: str) -> None:
    assert url_problem(_url(host)), host


@pytest.mark.parametrize("host", ["api.example.com", "0x.example.com", "123.example.com", "cafe.example", "a1.b2.c3"])
def test_names_stay_names(host: str) -> None:
    assert url_problem(_url(host)) is None, host


@pytest.mark.parametrize("address", TRANSITION_AND_IETF)
@pytest.mark.parametrize("allow_loopback", [False, True])
def test_transition_and_ietf_addresses_are_refused_at_registration(address: str, allow_loopback: bool) -> None:
    assert address_problem(ipaddress.ip_address(address), allow_loopback), address
    assert url_problem(_url(address), allow_loopback=allow_loopback), address
    with pytest.raises(AddressRefused):
        checked_address(_url(address), allow_loopback=allow_loopback)


@pytest.mark.parametrize("address", [*TRANSITION_AND_IETF, "::ffff:169.254.169.254", "::ffff:7f00:1"])
def test_transition_and_ietf_addresses_are_refused_at_request_time_after_dns(address: str) -> None:
    def resolver(name: str, port: int) -> list[str]:
        return ["93.184.216.34", address]  # one public answer does not make the other one fine

    assert url_problem("https://model.owner.example/v1") is None
    with pytest.raises(AddressRefused, match="refused address"):
        checked_address("https://model.owner.example/v1", resolver=resolver)


@pytest.mark.parametrize("address", ["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946", "192.0.1.1", "1.1.1.1"])
def test_public_addresses_still_pass(address: str) -> None:
    assert address_problem(ipaddress.ip_address(address), False) is None
    assert url_problem(_url(address)) is None
    assert checked_address("https://model.owner.example/v1", resolver=lambda h, p: [address]) == address
