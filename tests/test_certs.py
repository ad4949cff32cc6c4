"""A deployment's certificates (services/certs.py): what ``ensure`` makes and keeps, what
``rotate`` changes, that keys are private, and that what it makes verifies where it should."""

from __future__ import annotations

import datetime
import ssl
import stat
from pathlib import Path

import pytest
from cryptography import x509

from causal_client import tls
from services import certs
from services.topology import Topology

TOPOLOGY = Path(__file__).resolve().parents[1] / "topologies" / "demo-3region.toml"


def names_of(path: Path) -> set[str]:
    cert = x509.load_pem_x509_certificate(path.read_bytes())
    return {str(n.value) for n in cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value}


def test_ensure_makes_a_ca_a_certificate_per_node_and_one_for_clients_keys_private(tmp_path):
    topology = Topology.load(TOPOLOGY)
    made = certs.ensure(tmp_path / "tls", topology.name, certs.identities_of(topology, ["saturn.example"]))
    folder = tmp_path / "tls"
    assert ("ca", "new") in made
    assert {name for name, _ in made} == {"ca", *topology.node_names, "client"}
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for key in folder.glob("*.key"):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600, key
    region = topology.region_names[0]
    assert {region, topology.node_host(region), "localhost", "127.0.0.1", "saturn.example"} <= names_of(
        folder / f"{region}.pem"
    )
    # each verifies against the CA, as a server for its names
    context = tls.client_context(tls.TlsFiles.of(folder, "client"))
    server = tls.server_context(tls.TlsFiles.of(folder, region))
    assert context.verify_mode == ssl.CERT_REQUIRED and server.verify_mode == ssl.CERT_REQUIRED


def test_ensure_keeps_what_is_valid_and_reissues_what_lacks_a_name_or_expires(tmp_path):
    topology = Topology.load(TOPOLOGY)
    folder = tmp_path / "tls"
    identities = certs.identities_of(topology)
    certs.ensure(folder, topology.name, identities)
    region = topology.region_names[0]
    before = (folder / f"{region}.pem").read_bytes()
    assert certs.ensure(folder, topology.name, identities) == []
    assert (folder / f"{region}.pem").read_bytes() == before
    # a new name for every node: each is issued again, the CA kept
    ca = (folder / tls.CA_FILE).read_bytes()
    again = certs.ensure(folder, topology.name, certs.identities_of(topology, ["10.0.0.9"]))
    assert {why for _, why in again} == {"new names"} and (folder / tls.CA_FILE).read_bytes() == ca
    assert "10.0.0.9" in names_of(folder / f"{region}.pem")
    # one about to expire is renewed
    authority = certs.Authority.load(folder)
    soon = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=380)
    certs.write_identity(folder, authority, certs.Identity("client", certs.LOOPBACK), not_before=soon)
    assert certs.ensure(folder, topology.name, identities) == [("client", "expiring")]


def test_rotate_reissues_every_certificate_and_with_new_ca_the_ca_too(tmp_path):
    topology = Topology.load(TOPOLOGY)
    folder = tmp_path / "tls"
    identities = certs.identities_of(topology)
    certs.ensure(folder, topology.name, identities)
    ca, client = (folder / tls.CA_FILE).read_bytes(), (folder / "client.pem").read_bytes()
    assert set(certs.rotate(folder, topology.name, identities)) == {*topology.node_names, "client"}
    assert (folder / tls.CA_FILE).read_bytes() == ca and (folder / "client.pem").read_bytes() != client
    certs.rotate(folder, topology.name, identities, new_ca=True)
    assert (folder / tls.CA_FILE).read_bytes() != ca
    # nothing of the old CA is left: every certificate is of the new one
    assert certs.ensure(folder, topology.name, identities) == []


def test_the_command_makes_and_shows_them(tmp_path, capsys):
    folder = tmp_path / "tls"
    assert certs.main(["ensure", str(folder), "--topology", str(TOPOLOGY)]) == 0
    assert "made ca (new)" in capsys.readouterr().out
    assert certs.main(["ensure", str(folder), "--topology", str(TOPOLOGY)]) == 0
    assert "every certificate is valid" in capsys.readouterr().out
    assert certs.main(["show", str(folder)]) == 0
    shown = capsys.readouterr().out
    assert "ca.pem" in shown and "client.pem" in shown
    with pytest.raises(SystemExit):
        certs.main(["rotate", str(folder)])  # needs --topology


def test_missing_files_are_a_typed_error_naming_them(tmp_path):
    with pytest.raises(tls.TlsMisconfigured, match=r"ireland\.pem"):
        tls.TlsFiles.of(tmp_path, "ireland")


def test_a_directory_without_the_cas_key_is_issued_from_the_ca_named_never_a_new_one(tmp_path, capsys):
    topology = Topology.load(TOPOLOGY)
    ca_dir, tls_dir = tmp_path / "ca", tmp_path / "tls"
    certs.ensure(ca_dir, topology.name, [])
    authority = certs.Authority.load(ca_dir)
    certs.ensure(tls_dir, topology.name, [certs.Identity("client")], authority=authority, group_readable=True)
    assert not (tls_dir / certs.CA_KEY_FILE).exists()
    with pytest.raises(SystemExit):
        certs.main(["ensure", str(tls_dir), "--topology", str(TOPOLOGY)])
    assert "without its key" in capsys.readouterr().err
    assert (
        certs.main(
            ["ensure", str(tls_dir), "--ca", str(ca_dir), "--group-readable", "--topology", str(TOPOLOGY)]
        )
        == 0
    )
    assert (tls_dir / tls.CA_FILE).read_bytes() == (ca_dir / tls.CA_FILE).read_bytes()
    assert oct(tls_dir.stat().st_mode & 0o777) == "0o750"
