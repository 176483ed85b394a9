import base64
import datetime
import ssl
import unittest

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from manent_plugin import tls


class CertificateTemplateTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.identity = tls.generate()
        cls.cert = cls.identity.cert

    def ext(self, cls_):
        return self.cert.extensions.get_extension_for_class(cls_)

    def test_p521_ecdsa_with_sha512(self):
        key = self.cert.public_key()
        self.assertIsInstance(key, ec.EllipticCurvePublicKey)
        self.assertEqual(key.curve.name, "secp521r1")
        self.assertEqual(self.cert.signature_hash_algorithm.name, "sha512")

    def test_names(self):
        for name in (self.cert.subject, self.cert.issuer):
            self.assertEqual(name.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value,
                             "HashiCorp")
            self.assertEqual(name.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value,
                             "localhost")
        san = self.ext(x509.SubjectAlternativeName).value
        self.assertEqual(san.get_values_for_type(x509.DNSName), ["localhost"])

    def test_usages_and_constraints(self):
        ku = self.ext(x509.KeyUsage)
        self.assertTrue(ku.critical)
        v = ku.value
        self.assertTrue(v.digital_signature and v.key_encipherment and v.key_agreement
                        and v.key_cert_sign)
        self.assertFalse(v.crl_sign or v.content_commitment or v.data_encipherment)
        eku = self.ext(x509.ExtendedKeyUsage).value
        self.assertEqual(set(eku), {ExtendedKeyUsageOID.CLIENT_AUTH,
                                    ExtendedKeyUsageOID.SERVER_AUTH})
        bc = self.ext(x509.BasicConstraints)
        self.assertTrue(bc.critical)
        self.assertTrue(bc.value.ca)
        self.ext(x509.SubjectKeyIdentifier)

    def test_validity_and_serial(self):
        now = datetime.datetime.now(datetime.timezone.utc)
        before = getattr(self.cert, "not_valid_before_utc", None) or \
            self.cert.not_valid_before.replace(tzinfo=datetime.timezone.utc)
        after = getattr(self.cert, "not_valid_after_utc", None) or \
            self.cert.not_valid_after.replace(tzinfo=datetime.timezone.utc)
        self.assertLess(before, now)
        self.assertGreater(before, now - datetime.timedelta(seconds=120))
        self.assertAlmostEqual((after - before).total_seconds(),
                               262980 * 3600 + 30, delta=5)
        self.assertGreater(self.cert.serial_number, 0)
        self.assertLess(self.cert.serial_number, 2 ** 128)

    def test_handshake_field_is_unpadded_base64_der(self):
        field = self.identity.handshake_field()
        self.assertNotIn("=", field)
        self.assertGreater(len(field), 50)
        der = base64.b64decode(field + "=" * (-len(field) % 4))
        self.assertEqual(der, self.identity.der)

    def test_contexts_trust_the_host_and_speak_h2(self):
        host = tls.generate()
        server, client = tls.contexts(self.identity, host.cert_pem.decode())
        for ctx in (server, client):
            self.assertEqual(ctx.verify_mode, ssl.CERT_REQUIRED)
            self.assertEqual(ctx.minimum_version, ssl.TLSVersion.TLSv1_2)
            self.assertEqual(len(ctx.get_ca_certs()), 1)
        self.assertTrue(client.check_hostname)


if __name__ == "__main__":
    unittest.main()
