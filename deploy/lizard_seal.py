#!/usr/bin/python3
"""Sealing of custom-domain private keys, exactly as CONTRACT.md "Custom domains" says and the gateway
(tls/seal.c) opens them:

    v1.<base64url nonce>.<base64url ciphertext and tag>

AES-256-GCM, a random 12-byte nonce, the 16-byte tag appended to the ciphertext, the certificate
record's name (the <name> of lizard:cert:{<name>}) as associated data, under the 32-byte key that the
gateway's tls.sealed_key_env variable holds as 64 hex digits. base64url without padding.

Used by the example issuer and the tests:

    from lizard_seal import seal, unseal
    sealed = seal(key_hex, "example-com", open("key.pem", "rb").read())

or from a shell:  LIZARD_SEALED_KEY=<64 hex> deploy/lizard_seal.py NAME < key.pem
Needs python3-cryptography (Debian).
"""
import base64
import os
import sys

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

NONCE_LEN = 12


def _key(key_hex):
    key = bytes.fromhex(key_hex)
    if len(key) != 32:
        raise ValueError("the sealing key must be 64 hex digits (32 bytes)")
    return key


def _b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def seal(key_hex, name, plaintext):
    """The sealed form of `plaintext` (bytes) for the record `name`."""
    nonce = os.urandom(NONCE_LEN)
    sealed = AESGCM(_key(key_hex)).encrypt(nonce, plaintext, name.encode("utf-8"))
    return "v1." + _b64(nonce) + "." + _b64(sealed)


def unseal(key_hex, name, value):
    """The plaintext of `value`; raises on a wrong key, a wrong name or a tampered value."""
    version, nonce, sealed = value.split(".")
    if version != "v1" or len(_unb64(nonce)) != NONCE_LEN:
        raise ValueError("not a v1 sealed value")
    return AESGCM(_key(key_hex)).decrypt(_unb64(nonce), _unb64(sealed), name.encode("utf-8"))


if __name__ == "__main__":
    if len(sys.argv) != 2 or "LIZARD_SEALED_KEY" not in os.environ:
        sys.exit("usage: LIZARD_SEALED_KEY=<64 hex digits> lizard_seal.py NAME < key.pem")
    print(seal(os.environ["LIZARD_SEALED_KEY"], sys.argv[1], sys.stdin.buffer.read()))
