"""Client-certificate authentication against the client CA (user = CN, groups = O).

The chain was verified by the TLS layer; here it must end in the current client CA, be valid now
and allow client authentication (``apiserver.auth.x509``). Like kube, the user's extra carries
``authentication.kubernetes.io/credential-id: X509SHA256=<hex of the leaf>``.
"""

from __future__ import annotations

from apiserver.auth import authenticator, requestheader, trust, x509
from apiserver.auth import user as users


class ClientCertificate:
    def __init__(self, source: trust.Trust, *, now: requestheader.Now = requestheader.utcnow
                 ) -> None:
        self.source = source
        self.now = now

    async def authenticate(self, credentials: authenticator.Credentials) -> authenticator.Outcome:
        bundle = self.source.config.client_ca
        if not bundle or not credentials.peer_chain:
            return authenticator.NO_OPINION
        verified = x509.verify(credentials.peer_chain, bundle, self.now())
        if isinstance(verified, str):
            return authenticator.failed(f"client certificate: {verified}")
        name = verified.common_name
        if not name:
            return authenticator.failed("client certificate: the subject has no common name")
        return authenticator.Outcome(users.UserInfo(
            name=name,
            groups=verified.organizations,
            extra={users.CREDENTIAL_ID: (f"X509SHA256={verified.fingerprint}",)},
        ))
