"""The kernel's kTLS transmit, probed from Python as tls/ktls.c does in C
(an independent implementation, so that a test can compare /readyz's
"ktls" with it): TCP_ULP "tls" on an accepted loopback socket, a TLS 1.3
AES-128-GCM TLS_TX key, five bytes sent, one record of 27 bytes read."""
import socket
import struct

TCP_ULP = 31
SOL_TLS = 282
TLS_TX = 1
TLS_1_3_VERSION = 0x0304
TLS_CIPHER_AES_GCM_128 = 51


def ktls_transmit():
    """(available, why): available is True when the kernel sent the record."""
    listener = socket.socket()
    try:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        client = socket.create_connection(listener.getsockname(), timeout=2)
        server, _ = listener.accept()
        with client, server:
            try:
                server.setsockopt(socket.IPPROTO_TCP, TCP_ULP, b"tls")
                # struct tls12_crypto_info_aes_gcm_128: version, cipher_type, iv[8], key[16], salt[4], rec_seq[8]
                info = struct.pack("=HH8s16s4s8s", TLS_1_3_VERSION, TLS_CIPHER_AES_GCM_128, bytes(8), b"\x4b" * 16, bytes(4),
                                   bytes(8))
                server.setsockopt(SOL_TLS, TLS_TX, info)
                server.sendall(b"probe")
            except OSError as e:
                return False, str(e)
            record = b""
            while len(record) < 27:
                chunk = client.recv(27 - len(record))
                if not chunk:
                    return False, "EOF after %d bytes" % len(record)
                record += chunk
            ok = record[:3] == b"\x17\x03\x03" and int.from_bytes(record[3:5], "big") == 22
            return ok, record[:5].hex()
    finally:
        listener.close()
