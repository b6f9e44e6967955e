"""The development token issuer: an Ed25519 key pair that signs short-lived JWTs.

For laptops, compose, CI and load tests only; a real deployment trusts its
identity provider's JWKS and never holds this private key. Kept out of the
client library on purpose: signing tokens is the issuer's job, not a client's.
"""

from mrtr_dev_issuer.issuer import (
    DEFAULT_AUDIENCE,
    DEFAULT_ISSUER,
    ISSUER_KEY_VARIABLE,
    PRIVATE_KEY_NAME,
    PUBLIC_KEY_NAME,
    TOKEN_VARIABLE,
    DevIssuer,
    token_from_environment,
)

__all__ = [
    "DEFAULT_AUDIENCE",
    "DEFAULT_ISSUER",
    "ISSUER_KEY_VARIABLE",
    "PRIVATE_KEY_NAME",
    "PUBLIC_KEY_NAME",
    "TOKEN_VARIABLE",
    "DevIssuer",
    "token_from_environment",
]
