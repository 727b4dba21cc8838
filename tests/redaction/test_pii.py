"""Personal data: checksums decide for cards and IBANs; addresses and numbers in context."""

from __future__ import annotations

import pytest

from assay.policies.redaction.pii import card_ok, find_pii, iban_ok, luhn_ok


def kinds(text: str) -> list[tuple[str, str]]:
    data = text.encode()
    return [(f.kind, data[f.start : f.end].decode()) for f in find_pii(data)]


@pytest.mark.parametrize("card", ["4111 1111 1111 1111", "5500-0000-0000-0004", "340000000000009", "6011000990139424"])
def test_luhn_valid_cards_are_found(card):
    assert ("credit-card", card) in kinds(f"paid with {card} today")


@pytest.mark.parametrize("card", ["4111 1111 1111 1112", "5500-0000-0000-0005", "340000000000008", "1234567890123456"])
def test_luhn_invalid_or_non_card_numbers_are_kept(card):
    assert not [k for k, _ in kinds(f"order {card} shipped") if k == "credit-card"]


def test_luhn_itself():
    assert luhn_ok("79927398713") and not luhn_ok("79927398710")
    assert not card_ok(b"4111-1111 1111-1111")  # mixed separators are not a card layout


@pytest.mark.parametrize(
    "iban",
    ["GB82 WEST 1234 5698 7654 32", "DE89370400440532013000", "FR1420041010050500013M02606", "NL91ABNA0417164300"],
)
def test_valid_ibans_are_found(iban):
    assert ("iban", iban) in kinds(f"send to {iban} please")
    assert iban_ok(iban.encode())


@pytest.mark.parametrize(
    "iban", ["GB82 WEST 1234 5698 7654 33", "DE89370400440532013001", "NL91ABNA0417164301", "DE8937040044053201300"]
)
def test_invalid_ibans_are_kept(iban):
    assert not [k for k, _ in kinds(f"send to {iban} please") if k == "iban"]
    assert not iban_ok(iban.encode())


def test_emails_phones_and_addresses():
    found = kinds(
        "mail ana.lopez+ci@mail.example.org or call +44 20 7946 0958 or (415) 555-2671; "
        "client 203.0.113.77 and 2001:db8:85a3::8a2e:370:7334 and fe80::1%eth0"
    )
    assert ("email", "ana.lopez+ci@mail.example.org") in found
    assert ("phone", "+44 20 7946 0958") in found
    assert ("phone", "(415) 555-2671") in found
    assert ("ipv4", "203.0.113.77") in found
    assert ("ipv6", "2001:db8:85a3::8a2e:370:7334") in found
    assert ("ipv6", "fe80::1%eth0") in found


def test_what_is_not_personal_data_stays():
    text = (
        "listening on 127.0.0.1:8080 and ::1 and 0.0.0.0; std::vector<int> v; at 12:30:45; "
        "version 2.13.0; step=123456; 2025-10-03T13:55:36Z; mac 00:1a:2b:3c:4d:5e"
    )
    assert kinds(text) == []
