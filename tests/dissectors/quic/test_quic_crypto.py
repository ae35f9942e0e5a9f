"""QUIC packet protection against the published vectors.

RFC 9001 Appendix A (QUIC v1): A.1 keys, A.2 client Initial, A.3 server Initial, A.4 Retry,
A.5 ChaCha20-Poly1305 short header; RFC 9369 Appendix A (QUIC v2): the same examples with
the v2 salt, labels, long-header type bits and Retry key; RFC 9000 App. A.3 packet number
decoding.
"""

from __future__ import annotations

import pytest

from dissectors.errors import Malformed
from dissectors.quic import (
    QUIC_SUITES,
    QUIC_V1,
    QUIC_V2,
    AuthenticationFailed,
    PacketProtection,
    PacketType,
    decode_packet_number,
    initial_protection,
    initial_secrets,
    next_traffic_secret,
    packet_keys,
    parse_frames,
    parse_packet_header,
    retry_integrity_tag,
    verify_retry,
)
from dissectors.quic.frames import Crypto, Padding

AES128 = QUIC_SUITES[0x1301]
CHACHA = QUIC_SUITES[0x1303]

# RFC 9001 §A.1 / RFC 9369 §A.1: the client's Destination Connection ID
RFC9001_DCID = bytes.fromhex("8394c8f03e515708")

# RFC 9001 §A.1
RFC9001_INITIAL_SECRET = "7db5df06e7a69e432496adedb00851923595221596ae2ae9fb8115c1e9ed0a44"
RFC9001_CLIENT_INITIAL_SECRET = "c00cf151ca5be075ed0ebfb5c80323c42d6b7db67881289af4008f1f6c357aea"
RFC9001_CLIENT_KEYS = (
    "1f369613dd76d5467730efcbe3b1a22d",
    "fa044b2f42a3fd3b46fb255c",
    "9f50449e04a0e810283a1e9933adedd2",
)
RFC9001_SERVER_INITIAL_SECRET = "3c199828fd139efd216c155ad844cc81fb82fa8d7446fa7d78be803acdda951b"
RFC9001_SERVER_KEYS = (
    "cf3a5331653c364c88f0f379b6067e37",
    "0ac1493ca1905853b0bba03e",
    "c206b8d9b9f0f37644430b490eeaa314",
)
# RFC 9369 §A.1
RFC9369_CLIENT_INITIAL_SECRET = "14ec9d6eb9fd7af83bf5a668bc17a7e283766aade7ecd0891f70f9ff7f4bf47b"
RFC9369_CLIENT_KEYS = (
    "8b1a0bc121284290a29e0971b5cd045d",
    "91f73e2351d8fa91660e909f",
    "45b95e15235d6f45a6b19cbcb0294ba9",
)
RFC9369_SERVER_INITIAL_SECRET = "0263db1782731bf4588e7e4d93b7463907cb8cd8200b5da55a8bd488eafc37c1"
RFC9369_SERVER_KEYS = (
    "82db637861d55e1d011f19ea71d5d2a7",
    "dd13c276499c0249d3310652",
    "edf6d05c83121201b436e16877593c3a",
)

# RFC 9001 §A.2: the client's CRYPTO frame (ClientHello), padded with PADDING to 1162 bytes
RFC9001_CLIENT_CRYPTO_FRAME = bytes.fromhex(
    "060040f1010000ed0303ebf8fa56f12939b9584a3896472ec40bb863cfd3e868"
    "04fe3a47f06a2b69484c00000413011302010000c000000010000e00000b6578"
    "616d706c652e636f6dff01000100000a00080006001d00170018001000070005"
    "04616c706e000500050100000000003300260024001d00209370b2c9caa47fba"
    "baf4559fedba753de171fa71f50f1ce15d43e994ec74d748002b000302030400"
    "0d0010000e0403050306030203080408050806002d00020101001c0002400100"
    "3900320408ffffffffffffffff05048000ffff07048000ffff08011001048000"
    "75300901100f088394c8f03e51570806048000ffff"
)
RFC9001_CLIENT_PAYLOAD = RFC9001_CLIENT_CRYPTO_FRAME + bytes(917)
RFC9001_CLIENT_HEADER = bytes.fromhex("c300000001088394c8f03e5157080000449e00000002")
RFC9001_CLIENT_PACKET = bytes.fromhex(
    "c000000001088394c8f03e5157080000449e7b9aec34d1b1c98dd7689fb8ec11"
    "d242b123dc9bd8bab936b47d92ec356c0bab7df5976d27cd449f63300099f399"
    "1c260ec4c60d17b31f8429157bb35a1282a643a8d2262cad67500cadb8e7378c"
    "8eb7539ec4d4905fed1bee1fc8aafba17c750e2c7ace01e6005f80fcb7df6212"
    "30c83711b39343fa028cea7f7fb5ff89eac2308249a02252155e2347b63d58c5"
    "457afd84d05dfffdb20392844ae812154682e9cf012f9021a6f0be17ddd0c208"
    "4dce25ff9b06cde535d0f920a2db1bf362c23e596d11a4f5a6cf3948838a3aec"
    "4e15daf8500a6ef69ec4e3feb6b1d98e610ac8b7ec3faf6ad760b7bad1db4ba3"
    "485e8a94dc250ae3fdb41ed15fb6a8e5eba0fc3dd60bc8e30c5c4287e53805db"
    "059ae0648db2f64264ed5e39be2e20d82df566da8dd5998ccabdae053060ae6c"
    "7b4378e846d29f37ed7b4ea9ec5d82e7961b7f25a9323851f681d582363aa5f8"
    "9937f5a67258bf63ad6f1a0b1d96dbd4faddfcefc5266ba6611722395c906556"
    "be52afe3f565636ad1b17d508b73d8743eeb524be22b3dcbc2c7468d54119c74"
    "68449a13d8e3b95811a198f3491de3e7fe942b330407abf82a4ed7c1b311663a"
    "c69890f4157015853d91e923037c227a33cdd5ec281ca3f79c44546b9d90ca00"
    "f064c99e3dd97911d39fe9c5d0b23a229a234cb36186c4819e8b9c5927726632"
    "291d6a418211cc2962e20fe47feb3edf330f2c603a9d48c0fcb5699dbfe58964"
    "25c5bac4aee82e57a85aaf4e2513e4f05796b07ba2ee47d80506f8d2c25e50fd"
    "14de71e6c418559302f939b0e1abd576f279c4b2e0feb85c1f28ff18f58891ff"
    "ef132eef2fa09346aee33c28eb130ff28f5b766953334113211996d20011a198"
    "e3fc433f9f2541010ae17c1bf202580f6047472fb36857fe843b19f5984009dd"
    "c324044e847a4f4a0ab34f719595de37252d6235365e9b84392b061085349d73"
    "203a4a13e96f5432ec0fd4a1ee65accdd5e3904df54c1da510b0ff20dcc0c77f"
    "cb2c0e0eb605cb0504db87632cf3d8b4dae6e705769d1de354270123cb11450e"
    "fc60ac47683d7b8d0f811365565fd98c4c8eb936bcab8d069fc33bd801b03ade"
    "a2e1fbc5aa463d08ca19896d2bf59a071b851e6c239052172f296bfb5e724047"
    "90a2181014f3b94a4e97d117b438130368cc39dbb2d198065ae3986547926cd2"
    "162f40a29f0c3c8745c0f50fba3852e566d44575c29d39a03f0cda721984b6f4"
    "40591f355e12d439ff150aab7613499dbd49adabc8676eef023b15b65bfc5ca0"
    "6948109f23f350db82123535eb8a7433bdabcb909271a6ecbcb58b936a88cd4e"
    "8f2e6ff5800175f113253d8fa9ca8885c2f552e657dc603f252e1a8e308f76f0"
    "be79e2fb8f5d5fbbe2e30ecadd220723c8c0aea8078cdfcb3868263ff8f09400"
    "54da48781893a7e49ad5aff4af300cd804a6b6279ab3ff3afb64491c85194aab"
    "760d58a606654f9f4400e8b38591356fbf6425aca26dc85244259ff2b19c41b9"
    "f96f3ca9ec1dde434da7d2d392b905ddf3d1f9af93d1af5950bd493f5aa731b4"
    "056df31bd267b6b90a079831aaf579be0a39013137aac6d404f518cfd4684064"
    "7e78bfe706ca4cf5e9c5453e9f7cfd2b8b4c8d169a44e55c88d4a9a7f9474241"
    "e221af44860018ab0856972e194cd934"
)
# RFC 9001 §A.2: "sample = d1b1c98dd7689fb8ec11d242b123dc9b", "mask = 437b9aec36"
RFC9001_CLIENT_SAMPLE = "d1b1c98dd7689fb8ec11d242b123dc9b"
RFC9001_CLIENT_MASK = "437b9aec36"

# RFC 9001 §A.3: server Initial with ACK + CRYPTO(ServerHello), packet number 1
RFC9001_SERVER_HEADER = bytes.fromhex("c1000000010008f067a5502a4262b50040750001")
RFC9001_SERVER_PAYLOAD = bytes.fromhex(
    "02000000000600405a020000560303eefce7f7b37ba1d1632e96677825ddf739"
    "88cfc79825df566dc5430b9a045a1200130100002e00330024001d00209d3c94"
    "0d89690b84d08a60993c144eca684d1081287c834d5311bcf32bb9da1a002b00"
    "020304"
)
RFC9001_SERVER_PACKET = bytes.fromhex(
    "cf000000010008f067a5502a4262b5004075c0d95a482cd0991cd25b0aac406a"
    "5816b6394100f37a1c69797554780bb38cc5a99f5ede4cf73c3ec2493a1839b3"
    "dbcba3f6ea46c5b7684df3548e7ddeb9c3bf9c73cc3f3bded74b562bfb19fb84"
    "022f8ef4cdd93795d77d06edbb7aaf2f58891850abbdca3d20398c276456cbc4"
    "2158407dd074ee"
)

# RFC 9001 §A.4 / RFC 9369 §A.4: Retry with token "token", new SCID f067a5502a4262b5
RFC9001_RETRY = bytes.fromhex(
    "ff000000010008f067a5502a4262b5746f6b656e04a265ba2eff4d829058fb3f0f2496ba"
)
RFC9369_RETRY = bytes.fromhex(
    "cf6b3343cf0008f067a5502a4262b5746f6b656ec8646ce8bfe33952d955543665dcc7b6"
)

# RFC 9001 §A.5: ChaCha20-Poly1305 short header, PING, packet number 654360564
RFC9001_A5_SECRET = bytes.fromhex(
    "9ac312a7f877468ebe69422748ad00a15443f18203a07d6060f688f30f21632b"
)
RFC9001_A5_KEYS = (
    "c6d98ff3441c3fe1b2182094f69caa2ed4b716b65488960a7a984979fb23e1c8",
    "e0459b3474bdd0e44a41c144",
    "25a282b9e82f06f21f488917a4fc8f1b73573685608597d0efcb076b0ab7a7a4",
)
RFC9001_A5_KU = "1223504755036d556342ee9361d253421a826c9ecdf3c7148684b36b714881f9"
RFC9001_A5_PN = 654360564
RFC9001_A5_HEADER = bytes.fromhex("4200bff4")
RFC9001_A5_PACKET = bytes.fromhex("4cfe4189655e5cd55c41f69080575d7999c25a5bfb")
RFC9001_A5_SAMPLE = "5e5cd55c41f69080575d7999c25a5bfb"
RFC9001_A5_MASK = "aefefe7d03"

# RFC 9369 §A.2, §A.3, §A.5 (v2)
RFC9369_CLIENT_HEADER = bytes.fromhex("d36b3343cf088394c8f03e5157080000449e00000002")
RFC9369_CLIENT_PACKET = bytes.fromhex(
    "d76b3343cf088394c8f03e5157080000449ea0c95e82ffe67b6abcdb4298b485"
    "dd04de806071bf03dceebfa162e75d6c96058bdbfb127cdfcbf903388e99ad04"
    "9f9a3dd4425ae4d0992cfff18ecf0fdb5a842d09747052f17ac2053d21f57c5d"
    "250f2c4f0e0202b70785b7946e992e58a59ac52dea6774d4f03b55545243cf1a"
    "12834e3f249a78d395e0d18f4d766004f1a2674802a747eaa901c3f10cda5500"
    "cb9122faa9f1df66c392079a1b40f0de1c6054196a11cbea40afb6ef5253cd68"
    "18f6625efce3b6def6ba7e4b37a40f7732e093daa7d52190935b8da58976ff33"
    "12ae50b187c1433c0f028edcc4c2838b6a9bfc226ca4b4530e7a4ccee1bfa2a3"
    "d396ae5a3fb512384b2fdd851f784a65e03f2c4fbe11a53c7777c023462239dd"
    "6f7521a3f6c7d5dd3ec9b3f233773d4b46d23cc375eb198c63301c21801f6520"
    "bcfb7966fc49b393f0061d974a2706df8c4a9449f11d7f3d2dcbb90c6b877045"
    "636e7c0c0fe4eb0f697545460c806910d2c355f1d253bc9d2452aaa549e27a1f"
    "ac7cf4ed77f322e8fa894b6a83810a34b361901751a6f5eb65a0326e07de7c12"
    "16ccce2d0193f958bb3850a833f7ae432b65bc5a53975c155aa4bcb4f7b2c4e5"
    "4df16efaf6ddea94e2c50b4cd1dfe06017e0e9d02900cffe1935e0491d77ffb4"
    "fdf85290fdd893d577b1131a610ef6a5c32b2ee0293617a37cbb08b847741c3b"
    "8017c25ca9052ca1079d8b78aebd47876d330a30f6a8c6d61dd1ab5589329de7"
    "14d19d61370f8149748c72f132f0fc99f34d766c6938597040d8f9e2bb522ff9"
    "9c63a344d6a2ae8aa8e51b7b90a4a806105fcbca31506c446151adfeceb51b91"
    "abfe43960977c87471cf9ad4074d30e10d6a7f03c63bd5d4317f68ff325ba3bd"
    "80bf4dc8b52a0ba031758022eb025cdd770b44d6d6cf0670f4e990b22347a7db"
    "848265e3e5eb72dfe8299ad7481a408322cac55786e52f633b2fb6b614eaed18"
    "d703dd84045a274ae8bfa73379661388d6991fe39b0d93debb41700b41f90a15"
    "c4d526250235ddcd6776fc77bc97e7a417ebcb31600d01e57f32162a8560cacc"
    "7e27a096d37a1a86952ec71bd89a3e9a30a2a26162984d7740f81193e8238e61"
    "f6b5b984d4d3dfa033c1bb7e4f0037febf406d91c0dccf32acf423cfa1e70710"
    "10d3f270121b493ce85054ef58bada42310138fe081adb04e2bd901f2f13458b"
    "3d6758158197107c14ebb193230cd1157380aa79cae1374a7c1e5bbcb80ee23e"
    "06ebfde206bfb0fcbc0edc4ebec309661bdd908d532eb0c6adc38b7ca7331dce"
    "8dfce39ab71e7c32d318d136b6100671a1ae6a6600e3899f31f0eed19e3417d1"
    "34b90c9058f8632c798d4490da4987307cba922d61c39805d072b589bd52fdf1"
    "e86215c2d54e6670e07383a27bbffb5addf47d66aa85a0c6f9f32e59d85a44dd"
    "5d3b22dc2be80919b490437ae4f36a0ae55edf1d0b5cb4e9a3ecabee93dfc6e3"
    "8d209d0fa6536d27a5d6fbb17641cde27525d61093f1b28072d111b2b4ae5f89"
    "d5974ee12e5cf7d5da4d6a31123041f33e61407e76cffcdcfd7e19ba58cf4b53"
    "6f4c4938ae79324dc402894b44faf8afbab35282ab659d13c93f70412e85cb19"
    "9a37ddec600545473cfb5a05e08d0b209973b2172b4d21fb69745a262ccde96b"
    "a18b2faa745b6fe189cf772a9f84cbfc"
)
RFC9369_SERVER_HEADER = bytes.fromhex("d16b3343cf0008f067a5502a4262b50040750001")
RFC9369_SERVER_PACKET = bytes.fromhex(
    "dc6b3343cf0008f067a5502a4262b5004075d92faaf16f05d8a4398c47089698"
    "baeea26b91eb761d9b89237bbf87263017915358230035f7fd3945d88965cf17"
    "f9af6e16886c61bfc703106fbaf3cb4cfa52382dd16a393e42757507698075b2"
    "c984c707f0a0812d8cd5a6881eaf21ceda98f4bd23f6fe1a3e2c43edd9ce7ca8"
    "4bed8521e2e140"
)
RFC9369_A5_KEYS = (
    "3bfcddd72bcf02541d7fa0dd1f5f9eeea817e09a6963a0e6c7df0f9a1bab90f2",
    "a6b5bc6ab7dafce30ffff5dd",
    "d659760d2ba434a226fd37b35c69e2da8211d10c4f12538787d65645d5d1b8e2",
)
RFC9369_A5_PACKET = bytes.fromhex("5558b1c60ae7b6b932bc27d786f4bc2bb20f2162ba")


def hexes(t: tuple[bytes, ...]) -> tuple[str, ...]:
    return tuple(x.hex() for x in t)


# -- A.1 keys --------------------------------------------------------------------------
def test_rfc9001_a1_initial_secrets_and_keys() -> None:
    from dissectors.tls.crypto import hkdf_extract

    salt = bytes.fromhex("38762cf7f55934b34d179ae6a4c80cadccbb7f0a")
    assert hkdf_extract("sha256", salt, RFC9001_DCID).hex() == RFC9001_INITIAL_SECRET
    c, s = initial_secrets(QUIC_V1, RFC9001_DCID)
    assert c.hex() == RFC9001_CLIENT_INITIAL_SECRET
    assert s.hex() == RFC9001_SERVER_INITIAL_SECRET
    assert hexes(packet_keys(QUIC_V1, AES128, c)) == RFC9001_CLIENT_KEYS
    assert hexes(packet_keys(QUIC_V1, AES128, s)) == RFC9001_SERVER_KEYS


def test_rfc9369_a1_initial_secrets_and_keys() -> None:
    c, s = initial_secrets(QUIC_V2, RFC9001_DCID)
    assert c.hex() == RFC9369_CLIENT_INITIAL_SECRET
    assert s.hex() == RFC9369_SERVER_INITIAL_SECRET
    assert hexes(packet_keys(QUIC_V2, AES128, c)) == RFC9369_CLIENT_KEYS
    assert hexes(packet_keys(QUIC_V2, AES128, s)) == RFC9369_SERVER_KEYS


# -- A.2 / A.3 Initial packets ------------------------------------------------------------
@pytest.mark.parametrize(
    ("version", "packet", "header", "payload", "client"),
    [
        (QUIC_V1, RFC9001_CLIENT_PACKET, RFC9001_CLIENT_HEADER, RFC9001_CLIENT_PAYLOAD, True),
        (QUIC_V1, RFC9001_SERVER_PACKET, RFC9001_SERVER_HEADER, RFC9001_SERVER_PAYLOAD, False),
        (QUIC_V2, RFC9369_CLIENT_PACKET, RFC9369_CLIENT_HEADER, RFC9001_CLIENT_PAYLOAD, True),
        (QUIC_V2, RFC9369_SERVER_PACKET, RFC9369_SERVER_HEADER, RFC9001_SERVER_PAYLOAD, False),
    ],
    ids=["v1-client", "v1-server", "v2-client", "v2-server"],
)
def test_initial_packet_vectors(
    version: int, packet: bytes, header: bytes, payload: bytes, client: bool
) -> None:
    hdr, nxt = parse_packet_header(packet)
    assert nxt == len(packet) and hdr.length == len(packet)
    assert hdr.packet_type is PacketType.INITIAL and hdr.version == version
    cp, sp = initial_protection(version, RFC9001_DCID)
    prot = cp if client else sp
    assert hdr.pn_offset is not None
    got_header, pn, plaintext = prot.unprotect(packet, hdr.pn_offset, len(packet), -1)
    assert got_header == header
    assert pn == (2 if client else 1)
    assert plaintext == payload
    # and the other way: protecting the plaintext gives the published packet
    assert prot.protect(header, hdr.pn_offset, pn, payload) == packet
    # the other direction's keys do not authenticate it
    with pytest.raises(AuthenticationFailed):
        (sp if client else cp).unprotect(packet, hdr.pn_offset, len(packet), -1)


def test_rfc9001_a2_header_protection_sample_and_mask() -> None:
    cp, _ = initial_protection(QUIC_V1, RFC9001_DCID)
    assert RFC9001_CLIENT_PACKET[22:38].hex() == RFC9001_CLIENT_SAMPLE
    assert cp.header_mask(bytes.fromhex(RFC9001_CLIENT_SAMPLE)).hex() == RFC9001_CLIENT_MASK


def test_rfc9001_a2_client_payload_frames() -> None:
    frames = parse_frames(RFC9001_CLIENT_PAYLOAD)
    assert isinstance(frames[0], Crypto) and frames[0].offset == 0 and frames[0].length == 241
    assert isinstance(frames[1], Padding) and frames[1].frame_length == 917
    assert len(frames) == 2


def test_tampered_packet_fails_authentication() -> None:
    cp, _ = initial_protection(QUIC_V1, RFC9001_DCID)
    bad = bytearray(RFC9001_CLIENT_PACKET)
    bad[-1] ^= 1
    with pytest.raises(AuthenticationFailed):
        cp.unprotect(bytes(bad), 18, len(bad), -1)


def test_packet_too_short_to_sample_is_malformed() -> None:
    cp, _ = initial_protection(QUIC_V1, RFC9001_DCID)
    with pytest.raises(Malformed):
        cp.unprotect(RFC9001_CLIENT_PACKET[:30], 18, 30, -1)


# -- A.4 Retry ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("version", "packet"), [(QUIC_V1, RFC9001_RETRY), (QUIC_V2, RFC9369_RETRY)], ids=["v1", "v2"]
)
def test_retry_vectors(version: int, packet: bytes) -> None:
    hdr, _ = parse_packet_header(packet)
    assert hdr.packet_type is PacketType.RETRY
    assert hdr.token == b"token" and hdr.scid.hex() == "f067a5502a4262b5"
    assert retry_integrity_tag(version, RFC9001_DCID, packet[:-16]) == packet[-16:]
    assert verify_retry(version, RFC9001_DCID, packet)
    assert not verify_retry(version, bytes(8), packet)
    other = QUIC_V2 if version == QUIC_V1 else QUIC_V1
    assert not verify_retry(other, RFC9001_DCID, packet)


# -- A.5 ChaCha20-Poly1305 short header -------------------------------------------------------
@pytest.mark.parametrize(
    ("version", "keys", "packet"),
    [(QUIC_V1, RFC9001_A5_KEYS, RFC9001_A5_PACKET), (QUIC_V2, RFC9369_A5_KEYS, RFC9369_A5_PACKET)],
    ids=["v1", "v2"],
)
def test_chacha20_short_header(version: int, keys: tuple[str, ...], packet: bytes) -> None:
    assert hexes(packet_keys(version, CHACHA, RFC9001_A5_SECRET)) == keys
    prot = PacketProtection(version, CHACHA, RFC9001_A5_SECRET)
    hdr, _ = parse_packet_header(packet, dcid_length=0)
    assert hdr.packet_type is PacketType.ONE_RTT and hdr.pn_offset == 1
    header, pn, payload = prot.unprotect(packet, 1, len(packet), RFC9001_A5_PN - 1)
    assert (header, pn, payload) == (RFC9001_A5_HEADER, RFC9001_A5_PN, b"\x01")
    assert prot.protect(RFC9001_A5_HEADER, 1, RFC9001_A5_PN, b"\x01") == packet


def test_rfc9001_a5_mask_and_key_update_secret() -> None:
    prot = PacketProtection(QUIC_V1, CHACHA, RFC9001_A5_SECRET)
    assert prot.header_mask(bytes.fromhex(RFC9001_A5_SAMPLE)).hex() == RFC9001_A5_MASK
    assert next_traffic_secret(QUIC_V1, CHACHA, RFC9001_A5_SECRET).hex() == RFC9001_A5_KU
    # §6: the next phase has new packet keys but the same header protection key
    nxt = prot.next_phase()
    sample = bytes.fromhex(RFC9001_A5_SAMPLE)
    assert nxt.header_mask(sample) == prot.header_mask(sample)
    with pytest.raises(AuthenticationFailed):
        nxt.unprotect(RFC9001_A5_PACKET, 1, len(RFC9001_A5_PACKET), RFC9001_A5_PN - 1)


def test_key_material_is_not_printed() -> None:
    prot = PacketProtection(QUIC_V1, CHACHA, RFC9001_A5_SECRET)
    assert "redacted" in repr(prot)
    assert RFC9001_A5_SECRET.hex()[:8] not in repr(prot)


# -- RFC 9000 App. A.3 ----------------------------------------------------------------------
def test_packet_number_decoding_rfc9000_a3_example() -> None:
    # "if the highest successfully authenticated packet had a packet number of 0xa82f30ea,
    # then a packet containing a 16-bit value of 0x9b32 will be decoded as 0xa82f9b32"
    assert decode_packet_number(0x9B32, 16, 0xA82F30EA) == 0xA82F9B32


@pytest.mark.parametrize(
    ("truncated", "nbits", "largest", "expected"),
    [
        (0, 8, -1, 0),
        (1, 8, 0, 1),
        (0x00, 8, 0xFF, 0x100),  # wraps forward
        (0xFF, 8, 0x100, 0xFF),  # a late packet just below the window
        (0xBFF4, 24, 654360563, 654360564),
    ],
)
def test_packet_number_decoding(truncated: int, nbits: int, largest: int, expected: int) -> None:
    assert decode_packet_number(truncated, nbits, largest) == expected
