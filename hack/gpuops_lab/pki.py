"""Certificates and the kubeconfig of the local control plane (python cryptography; no openssl calls)."""

from __future__ import annotations

import datetime as dt
import ipaddress
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

FILES = (
    "ca.crt",
    "ca.key",
    "apiserver.crt",
    "apiserver.key",
    "admin.crt",
    "admin.key",
    "sa.key",
    "sa.pub",
    "front-proxy-ca.crt",
    "front-proxy-client.crt",
    "front-proxy-client.key",
)
# The aggregation layer's client identity (the API server's --proxy-client-cert-file, signed by its own CA,
# --requestheader-client-ca-file): how an aggregated API server such as Kueue's visibility API knows a request comes
# from the API server, which names the user in X-Remote-User/X-Remote-Group
FRONT_PROXY_CLIENT = "front-proxy-client"


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _pem_key(key: rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _name(cn: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    if org:
        attrs.insert(0, x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


def _cert(subject, issuer, pub, signer, *, ca=False, server=False, sans=(), days=365) -> x509.Certificate:
    now = dt.datetime.now(dt.UTC)
    b = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(pub)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        b = b.add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True)
    else:
        b = b.add_extension(x509.KeyUsage(True, False, True, False, False, False, False, False, False), critical=True)
        eku = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        b = b.add_extension(x509.ExtendedKeyUsage([eku]), critical=False)
    if sans:
        b = b.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
    return b.sign(signer, hashes.SHA256())


def ensure_pki(d: Path) -> bool:
    """Create the CA, the serving cert, the admin client cert and the service-account key pair once.
    Returns True when files were created."""
    if all((d / f).is_file() for f in FILES):
        return False
    d.mkdir(parents=True, exist_ok=True)
    ca_key = _key()
    ca = _cert(_name("gpuops-lab-ca"), _name("gpuops-lab-ca"), ca_key.public_key(), ca_key, ca=True, days=3650)
    srv_key = _key()
    sans = [
        x509.DNSName(n)
        for n in (
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        )
    ]
    sans += [x509.IPAddress(ipaddress.ip_address(a)) for a in ("127.0.0.1", "10.96.0.1")]
    srv = _cert(_name("kube-apiserver"), ca.subject, srv_key.public_key(), ca_key, server=True, sans=sans)
    adm_key = _key()
    adm = _cert(_name("kubernetes-admin", "system:masters"), ca.subject, adm_key.public_key(), ca_key)
    sa_key = _key()
    fp_ca_key = _key()
    fp_ca = _cert(
        _name("gpuops-lab-front-proxy-ca"),
        _name("gpuops-lab-front-proxy-ca"),
        fp_ca_key.public_key(),
        fp_ca_key,
        ca=True,
        days=3650,
    )
    fp_key = _key()
    fp = _cert(_name(FRONT_PROXY_CLIENT), fp_ca.subject, fp_key.public_key(), fp_ca_key)
    out = {
        "ca.crt": ca.public_bytes(serialization.Encoding.PEM),
        "ca.key": _pem_key(ca_key),
        "apiserver.crt": srv.public_bytes(serialization.Encoding.PEM),
        "apiserver.key": _pem_key(srv_key),
        "admin.crt": adm.public_bytes(serialization.Encoding.PEM),
        "admin.key": _pem_key(adm_key),
        "sa.key": _pem_key(sa_key),
        "sa.pub": sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ),
        "front-proxy-ca.crt": fp_ca.public_bytes(serialization.Encoding.PEM),
        "front-proxy-client.crt": fp.public_bytes(serialization.Encoding.PEM),
        "front-proxy-client.key": _pem_key(fp_key),
    }
    for name, data in out.items():
        p = d / name
        p.write_bytes(data)
        p.chmod(0o600 if name.endswith(".key") else 0o644)
    return True


def ensure_serving_cert(d: Path, name: str, dns: tuple[str, ...] = ()) -> bool:
    """A serving certificate <d>/<name>.crt/.key for 127.0.0.1, localhost and the names in `dns` (a Service's
    `<name>.<namespace>.svc`, the name the API server checks when it calls a webhook on a Service), signed by the lab
    CA (ensure_pki first); made once. Returns True when created."""
    crt, key_file = d / f"{name}.crt", d / f"{name}.key"
    if crt.is_file() and key_file.is_file():
        return False
    ca_key = serialization.load_pem_private_key((d / "ca.key").read_bytes(), password=None)
    ca = x509.load_pem_x509_certificate((d / "ca.crt").read_bytes())
    key = _key()
    sans = [
        x509.DNSName("localhost"),
        *(x509.DNSName(n) for n in dns),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
    ]
    cert = _cert(_name(name), ca.subject, key.public_key(), ca_key, server=True, sans=sans)
    key_file.write_bytes(_pem_key(key))
    key_file.chmod(0o600)
    crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return True


def write_kubeconfig(path: Path, pki: Path, server: str) -> None:
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "gpuops-lab", "cluster": {"server": server, "certificate-authority": str(pki / "ca.crt")}}
        ],
        "users": [
            {
                "name": "gpuops-lab-admin",
                "user": {"client-certificate": str(pki / "admin.crt"), "client-key": str(pki / "admin.key")},
            }
        ],
        "contexts": [{"name": "gpuops-lab", "context": {"cluster": "gpuops-lab", "user": "gpuops-lab-admin"}}],
        "current-context": "gpuops-lab",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    path.chmod(0o600)
