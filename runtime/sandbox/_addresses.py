"""Which IP addresses the HTTP capability treats as internal, and how a host name becomes
addresses (the resolver `perform` calls once per request, and tests replace).

An address is internal when it is not globally reachable: the IANA special-purpose registries
(IPv4 and IPv6) list the ranges, and every IPv6 address outside global unicast (2000::/3) is
unassigned. Addresses that embed an IPv4 address (IPv4-mapped, 6to4, NAT64) are judged by the
IPv4 address they lead to. Rejected: `ipaddress`'s `is_private` / `is_global`, whose ranges
changed between Python patch releases (3.11 and 3.12 disagree on several), so the rule would
depend on the interpreter; and a filter of a few named ranges (loopback, RFC 1918), which lets
shared address space (100.64.0.0/10, where some clouds serve instance metadata) through.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Sequence

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

Resolver = Callable[[str], Sequence[IPAddress]]
"""Turns a host name into the addresses to connect to, in preference order; raises OSError
when the name does not resolve. `perform` calls it at most once per request."""

_V4 = ipaddress.IPv4Network
_V6 = ipaddress.IPv6Network

# Most specific first: the first range containing an address names its kind.
_INTERNAL_V4: tuple[tuple[ipaddress.IPv4Network, str], ...] = (
    (_V4("0.0.0.0/8"), "unspecified ('this network')"),
    (_V4("10.0.0.0/8"), "private (RFC 1918)"),
    (_V4("100.64.0.0/10"), "shared (carrier-grade NAT)"),
    (_V4("127.0.0.0/8"), "loopback"),
    (_V4("169.254.0.0/16"), "link-local (cloud instance metadata lives here)"),
    (_V4("172.16.0.0/12"), "private (RFC 1918)"),
    (_V4("192.0.0.0/24"), "reserved (IETF protocol assignments)"),
    (_V4("192.0.2.0/24"), "reserved (documentation)"),
    (_V4("192.168.0.0/16"), "private (RFC 1918)"),
    (_V4("198.18.0.0/15"), "reserved (benchmarking)"),
    (_V4("198.51.100.0/24"), "reserved (documentation)"),
    (_V4("203.0.113.0/24"), "reserved (documentation)"),
    (_V4("224.0.0.0/4"), "multicast"),
    (_V4("240.0.0.0/4"), "reserved (including broadcast)"),
)
_INTERNAL_V6: tuple[tuple[ipaddress.IPv6Network, str], ...] = (
    (_V6("::/128"), "unspecified"),
    (_V6("::1/128"), "loopback"),
    (_V6("64:ff9b:1::/48"), "reserved (local-use NAT64)"),
    (_V6("100::/64"), "reserved (discard-only)"),
    (_V6("2001::/23"), "reserved (IETF protocol assignments)"),
    (_V6("2001:db8::/32"), "reserved (documentation)"),
    (_V6("3fff::/20"), "reserved (documentation)"),
    (_V6("5f00::/16"), "reserved (segment routing)"),
    (_V6("fc00::/7"), "private (unique-local)"),
    (_V6("fe80::/10"), "link-local"),
    (_V6("fec0::/10"), "private (site-local)"),
    (_V6("ff00::/8"), "multicast"),
)
_GLOBAL_UNICAST_V6 = _V6("2000::/3")
_NAT64 = _V6("64:ff9b::/96")


def internal_kind(address: IPAddress) -> str | None:
    """What kind of internal address `address` is ("loopback", "private (RFC 1918)", ...), or
    None when it is globally reachable. Use it to screen the addresses a name resolved to."""
    if isinstance(address, ipaddress.IPv4Address):
        return next((kind for net, kind in _INTERNAL_V4 if address in net), None)
    embedded = address.ipv4_mapped or address.sixtofour
    if embedded is None and address in _NAT64:
        embedded = ipaddress.IPv4Address(int(address) & 0xFFFF_FFFF)
    if embedded is not None:
        inner = internal_kind(embedded)
        return None if inner is None else f"{inner}, as {embedded} embedded in IPv6"
    if kind := next((kind for net, kind in _INTERNAL_V6 if address in net), None):
        return kind
    if address not in _GLOBAL_UNICAST_V6:
        return "reserved (outside IPv6 global unicast 2000::/3)"
    return None


def system_resolver(host: str) -> list[IPAddress]:
    """The operating system's resolver (`getaddrinfo`): IPv4 and IPv6 stream addresses, in the
    order it prefers them, without repeats. The default `Resolver` of `perform`."""
    found: list[IPAddress] = []
    for family, _, _, _, sockaddr in socket.getaddrinfo(host, None, type=socket.SOCK_STREAM):
        if family not in (socket.AF_INET, socket.AF_INET6):
            continue
        # A link-local IPv6 answer may carry its zone ("fe80::1%eth0"); it is internal either way.
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if address not in found:
            found.append(address)
    return found


__all__ = ["IPAddress", "Resolver", "internal_kind", "system_resolver"]
