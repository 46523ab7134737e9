"""An independent implementation of the share-link format of CONTRACT.md
("Share links"), written from the contract's text alone, not from the C code:
the integration tests mint links with it so that the format, not only the
gateway's own signer, is what gets tested. A control plane can copy it.

    P     = base64url_nopad("<sandboxId>|<port>|<exp>|<epoch>|<kid>")
    S     = base64url_nopad(HMAC-SHA256(secret[kid], "lzs1." + P))
    token = "lzs1." + P + "." + S

and view-only links (CONTRACT.md, "Desktops"): the same P and S, signed over
"lzv1." + P, token = "lzv1." + P + "." + S.
"""
import base64
import hashlib
import hmac

PREFIX = "lzs1."
VIEW_PREFIX = "lzv1."


def b64url_nopad(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def mint(kid: str, secret: bytes, sandbox_id: str, port: int, exp: int, epoch: int = 0, view_only: bool = False) -> str:
    payload = b64url_nopad(f"{sandbox_id}|{port}|{exp}|{epoch}|{kid}".encode())
    signed = (VIEW_PREFIX if view_only else PREFIX) + payload
    sig = b64url_nopad(hmac.new(secret, signed.encode(), hashlib.sha256).digest())
    return signed + "." + sig


def parse(token: str) -> dict:
    """The fields of a token, unverified (for tests that alter one)."""
    assert token.startswith(PREFIX) or token.startswith(VIEW_PREFIX)
    payload, _sig = token[len(PREFIX):].split(".")
    raw = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)).decode()
    sandbox_id, port, exp, epoch, kid = raw.split("|")
    return {"sandbox": sandbox_id, "port": int(port), "exp": int(exp), "epoch": int(epoch), "kid": kid}


def keys_text(keys: dict) -> str:
    """The key list as the gateway reads it: lines <kid>:<secret>."""
    return "".join(f"{kid}:{secret.decode()}\n" for kid, secret in keys.items())
