"""A small local certificate authority for the management plane (docs/security.md).

`ensure(directory, names)` creates, if missing, a CA (`ca.crt`, `ca.key`), one certificate and
key per component name (`<name>.crt`, `<name>.key`: "controller", "switch", "etcd" (the etcd
members' server and peer certificate), "nf-<id>"), and the
heartbeat secret (`heartbeat.secret`) with each NF's key derived from it (`nf-<id>.hbkey`). It is
idempotent: what exists is kept (so a running system's certificates stay valid), what is missing
is added, signed by the existing CA. `make pki` runs it for the example topologies; the launcher
(topo/) runs it for the NFs of its configuration; tests run it into temporary directories.

Identities are names, not addresses: every certificate carries its component name as a DNS name
(the controller checks an NF's certificate against "nf-<id>", whatever its address), plus
"localhost", 127.0.0.1 and any addresses given. A real deployment uses its own CA and files of the
same names (docs/security.md); nothing here runs in a component at start-up.

Built on `cryptography` (docs/dependencies.md): X.509 and key handling are not to be hand-written.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import hashlib
import hmac
import ipaddress
import os
import secrets
from collections.abc import Iterable, Sequence
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA = "ca"
SECRET = "heartbeat.secret"
VALID_DAYS = 3650
HB_KEY_LABEL = b"nfcluster heartbeat key v1"


def nf_name(nf_id: int) -> str:
    """The certificate name (and DNS name in it) of NF `nf_id`."""
    return f"nf-{nf_id}"


def derive_heartbeat_key(secret: bytes, nf_id: int) -> bytes:
    """NF `nf_id`'s heartbeat key: HMAC-SHA256(secret, label || id). An NF holds only its own key;
    the controller derives every NF's from the secret."""
    return hmac.new(secret, HB_KEY_LABEL + nf_id.to_bytes(2, "big"), hashlib.sha256).digest()


def _write_private(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _write_public(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _ca(directory: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    crt, key = directory / f"{CA}.crt", directory / f"{CA}.key"
    if crt.exists() and key.exists():
        ca_key = serialization.load_pem_private_key(key.read_bytes(), None)
        assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
        return x509.load_pem_x509_certificate(crt.read_bytes()), ca_key
    ca_key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "nfcluster local CA")])
    now = _now()
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False,
                                         False), critical=True)
            .sign(ca_key, hashes.SHA256()))
    _write_private(key, _key_pem(ca_key))
    _write_public(crt, cert.public_bytes(serialization.Encoding.PEM))
    return cert, ca_key


def issue(directory: Path, name: str, addresses: Iterable[str] = (),
          ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None = None) -> None:
    """Write `<name>.crt` and `<name>.key`, signed by the directory's CA (always anew)."""
    ca_cert, ca_key = ca or _ca(directory)
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = [x509.DNSName(name), x509.DNSName("localhost"),
                                    x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    for a in addresses:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(a)))
        except ValueError:
            sans.append(x509.DNSName(a))
    now = _now()
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca_cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                  ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    _write_private(directory / f"{name}.key", _key_pem(key))
    _write_public(directory / f"{name}.crt", cert.public_bytes(serialization.Encoding.PEM))


def ensure(directory: str | Path, names: Iterable[str], nf_ids: Iterable[int] = ()) -> Path:
    """Create what is missing in `directory` (see the module docstring): the CA, a certificate
    for each of `names` and of "nf-<id>" for each of `nf_ids`, the heartbeat secret and each of
    those NFs' heartbeat keys. Returns the directory."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    os.chmod(d, 0o700)
    ca = _ca(d)
    ids = sorted(set(nf_ids))
    for name in [*names, *(nf_name(i) for i in ids)]:
        if not ((d / f"{name}.crt").exists() and (d / f"{name}.key").exists()):
            issue(d, name, ca=ca)
    secret_path = d / SECRET
    if not secret_path.exists():
        _write_private(secret_path, secrets.token_bytes(32))
    secret = secret_path.read_bytes()
    for i in ids:
        path = d / f"{nf_name(i)}.hbkey"
        if not path.exists():
            _write_private(path, derive_heartbeat_key(secret, i))
    return d


REPO_PKI = Path(__file__).resolve().parent.parent / "build" / "pki"
LOCAL_NFS = range(1, 65)
COMPONENTS = ["controller", "switch", "etcd"]  # the certificates besides the NFs'


@functools.cache
def local_pki() -> Path:
    """The repository's PKI (build/pki, as `make pki` creates it) with NFs 1..64: what the
    launcher (topo/), the test harness and the tests use (created if missing)."""
    return ensure(REPO_PKI, COMPONENTS, LOCAL_NFS)


def nf_ids_of(configs: Sequence[Path]) -> list[int]:
    """The NF ids of controller configuration files (the example topologies')."""
    import yaml  # (only the command line reads configurations)
    ids: set[int] = set()
    for path in configs:
        data = yaml.safe_load(path.read_text()) or {}
        ids.update(int(nf["id"]) for nf in data.get("nfs", []))
    return sorted(ids)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mgmt.pki",
        description="Create (idempotently) the local CA, the certificates of the controller, the "
                    "switch, etcd and every NF of the given controller configurations, and the "
                    "heartbeat keys (docs/security.md).")
    parser.add_argument("--dir", default="build/pki", help="where (default build/pki)")
    parser.add_argument("--config", action="append", type=Path, default=[],
                        help="controller YAML whose NFs get certificates (repeatable)")
    parser.add_argument("--nfs", type=int, default=0, help="also NFs 1..N")
    args = parser.parse_args(argv)
    ids = set(nf_ids_of(args.config)) | set(range(1, args.nfs + 1))
    d = ensure(args.dir, COMPONENTS, ids)
    print(f"PKI in {d}: CA, controller, switch, etcd and {len(ids)} NF certificates")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
