#!/usr/bin/env python3
"""A real SMTP server (aiosmtpd) on loopback for the SMTP client's tests (Tests/SMTPClientTests).

  smtp_server.py certs DIR NAME...
      Writes DIR/ca.pem (a test CA), DIR/server.pem and DIR/server.key (a server certificate the
      CA signed, for the NAMEs: DNS names or IP addresses).

  smtp_server.py serve --port P --dir D [--tls none|starttls|implicit] [--certs C]
                       [--auth USER:PASSWORD] [--mechanisms PLAIN,LOGIN] [--slow SECONDS] [--tarpit SECONDS]
                       [--smtputf8] [--stall-quit SECONDS] [--lifetime SECONDS]
      Listens on 127.0.0.1:P. With --tls starttls the server requires STARTTLS before any mail
      command; with implicit, TLS from the first byte (C/server.pem, C/server.key). --auth requires
      AUTH (refused over plain text) with these credentials; --mechanisms limits the mechanisms
      offered. --slow waits that long before answering the end of a message's data. --tarpit waits
      that long before answering each of MAIL, RCPT and DATA (a tarpitting relay: every answer in
      time, the whole conversation slow), and writes D/stalled when it first stalls. --smtputf8
      offers SMTPUTF8 (RFC 6531: non-ASCII addresses); without it such an address is refused.
      --stall-quit waits that long before answering QUIT.
      Recipients whose local part is `reject550` are refused with 550, `defer451` deferred with 451.
      Each accepted message is written to D/messages/<n>.json (mail_from, rcpt_tos, data, tls,
      auth_mechanism, mail_options); D/ready is written once the server listens. Exits after --lifetime seconds
      (default 300) so a test that died leaves nothing running for long.
"""
import argparse
import asyncio
import datetime
import ipaddress
import json
import os
import ssl
import sys

from aiosmtpd.smtp import SMTP, AuthResult, LoginPassword


def make_certs(folder, names):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Gatehouse test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                                       encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    alt_names = []
    for name in names:
        try:
            alt_names.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            alt_names.append(x509.DNSName(name))
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])])).issuer_name(ca_name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "ca.pem"), "wb") as f:
        f.write(ca.public_bytes(serialization.Encoding.PEM))
    with open(os.path.join(folder, "server.pem"), "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(os.path.join(folder, "server.key"), "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))


class Handler:
    def __init__(self, folder, slow, tarpit=0, stall_quit=0):
        self.stall_quit = stall_quit
        self.folder = folder
        self.slow = slow
        self.tarpit = tarpit
        self.count = 0
        os.makedirs(os.path.join(folder, "messages"), exist_ok=True)

    async def stall(self):
        if not self.tarpit:
            return
        marker = os.path.join(self.folder, "stalled")
        if not os.path.exists(marker):
            with open(marker, "w") as f:
                f.write("stalled")
        await asyncio.sleep(self.tarpit)

    async def handle_QUIT(self, server, session, envelope):
        if self.stall_quit:
            await asyncio.sleep(self.stall_quit)
        return "221 Bye"

    async def handle_MAIL(self, server, session, envelope, address, mail_options):
        await self.stall()
        envelope.mail_from = address
        envelope.mail_options.extend(mail_options)
        return "250 OK"

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        await self.stall()
        local = address.split("@")[0].lower()
        if local == "reject550":
            return "550 5.1.1 No such user here"
        if local == "defer451":
            return "451 4.3.0 Try again later"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        await self.stall()
        if self.slow:
            await asyncio.sleep(self.slow)
        self.count += 1
        record = {
            "mail_from": envelope.mail_from,
            "rcpt_tos": envelope.rcpt_tos,
            "data": envelope.content.decode("utf-8", errors="replace"),
            # session.ssl is set by STARTTLS only; the transport knows about implicit TLS.
            "tls": session.ssl is not None or server.transport.get_extra_info("ssl_object") is not None,
            "auth_mechanism": getattr(session, "gatehouse_mechanism", None),
            "mail_options": envelope.mail_options,
        }
        path = os.path.join(self.folder, "messages", "%d.json" % self.count)
        with open(path + ".tmp", "w") as f:
            json.dump(record, f)
        os.rename(path + ".tmp", path)
        return "250 Message accepted for delivery"


def authenticator_for(user, password):
    def authenticate(server, session, envelope, mechanism, auth_data):
        ok = (isinstance(auth_data, LoginPassword)
              and auth_data.login == user.encode() and auth_data.password == password.encode())
        if ok:
            session.gatehouse_mechanism = mechanism
        return AuthResult(success=ok, handled=False)
    return authenticate


def serve(args):
    context = None
    if args.tls != "none":
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(os.path.join(args.certs, "server.pem"), os.path.join(args.certs, "server.key"))
    kwargs = {"hostname": "harness.test", "timeout": 60, "enable_SMTPUTF8": args.smtputf8}
    if args.tls == "starttls":
        kwargs.update(tls_context=context, require_starttls=True)
    if args.auth:
        user, password = args.auth.split(":", 1)
        # aiosmtpd counts only STARTTLS as TLS for auth_require_tls: under implicit TLS it would never offer AUTH.
        kwargs.update(authenticator=authenticator_for(user, password), auth_required=True,
                      auth_require_tls=args.tls != "implicit")
        if args.mechanisms:
            offered = set(args.mechanisms.upper().split(","))
            kwargs["auth_exclude_mechanism"] = [m for m in ("PLAIN", "LOGIN") if m not in offered]
    handler = Handler(args.dir, args.slow, args.tarpit, args.stall_quit)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    server = loop.run_until_complete(loop.create_server(
        lambda: SMTP(handler, loop=loop, **kwargs), "127.0.0.1", args.port,
        ssl=context if args.tls == "implicit" else None))
    with open(os.path.join(args.dir, "ready.tmp"), "w") as f:
        f.write(str(args.port))
    os.rename(os.path.join(args.dir, "ready.tmp"), os.path.join(args.dir, "ready"))
    loop.call_later(args.lifetime, loop.stop)
    try:
        loop.run_forever()
    finally:
        server.close()


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "certs":
        make_certs(sys.argv[2], sys.argv[3:] or ["localhost", "127.0.0.1"])
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["serve"])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--dir", required=True)
    parser.add_argument("--tls", choices=["none", "starttls", "implicit"], default="none")
    parser.add_argument("--certs")
    parser.add_argument("--auth")
    parser.add_argument("--mechanisms")
    parser.add_argument("--slow", type=float, default=0)
    parser.add_argument("--tarpit", type=float, default=0)
    parser.add_argument("--smtputf8", action="store_true")
    parser.add_argument("--stall-quit", type=float, default=0)
    parser.add_argument("--lifetime", type=float, default=300)
    serve(parser.parse_args())


if __name__ == "__main__":
    main()
