//! go-plugin's AutoMTLS: each side makes a self-signed P-521 certificate (the template
//! go-plugin uses) and trusts exactly the peer's certificate. rustls' stock verifiers reject
//! go-plugin certificates (CA:TRUE leaves), so the verifiers here pin the peer's DER and check
//! handshake signatures with the aws-lc-rs provider, which does P-521.

use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, PKCS_ECDSA_P521_SHA512,
};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{
    ClientConfig, DigitallySignedStruct, DistinguishedName as TlsName, ServerConfig,
    SignatureScheme,
};

/// This process's certificate and key for one plugin connection.
#[derive(Debug, Clone)]
pub struct Identity {
    /// DER of the certificate.
    pub cert: CertificateDer<'static>,
    /// PEM of the certificate (`PLUGIN_CLIENT_CERT`).
    pub cert_pem: String,
    key: Arc<PrivatePkcs8KeyDer<'static>>,
}

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("TLS setup failed: {0}")]
pub struct TlsError(String);

impl Identity {
    /// A fresh self-signed P-521 identity with go-plugin's certificate template.
    pub fn generate() -> Result<Self, TlsError> {
        let err = |e: rcgen::Error| TlsError(e.to_string());
        let key = KeyPair::generate_for(&PKCS_ECDSA_P521_SHA512).map_err(err)?;
        let mut params = CertificateParams::new(vec!["localhost".to_owned()]).map_err(err)?;
        let mut dn = DistinguishedName::new();
        dn.push(DnType::OrganizationName, "HashiCorp");
        dn.push(DnType::CommonName, "localhost");
        params.distinguished_name = dn;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
            KeyUsagePurpose::KeyAgreement,
            KeyUsagePurpose::KeyCertSign,
        ];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ClientAuth,
            ExtendedKeyUsagePurpose::ServerAuth,
        ];
        params.not_before = rcgen::date_time_ymd(2000, 1, 1);
        params.not_after = rcgen::date_time_ymd(2099, 12, 31);
        let cert = params.self_signed(&key).map_err(err)?;
        Ok(Identity {
            cert: cert.der().clone(),
            cert_pem: cert.pem(),
            key: Arc::new(PrivatePkcs8KeyDer::from(key.serialize_der())),
        })
    }

    fn key(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(self.key.as_ref().clone_key())
    }
}

/// DER of the first certificate in PEM text (`PLUGIN_CLIENT_CERT`).
pub fn der_from_pem(pem: &str) -> Option<CertificateDer<'static>> {
    use base64::Engine as _;
    let body: String = pem
        .lines()
        .skip_while(|l| !l.starts_with("-----BEGIN CERTIFICATE-----"))
        .skip(1)
        .take_while(|l| !l.starts_with("-----END CERTIFICATE-----"))
        .collect();
    base64::engine::general_purpose::STANDARD
        .decode(body.trim())
        .ok()
        .map(CertificateDer::from)
}

fn provider() -> Arc<CryptoProvider> {
    static PROVIDER: std::sync::LazyLock<Arc<CryptoProvider>> =
        std::sync::LazyLock::new(|| Arc::new(rustls::crypto::aws_lc_rs::default_provider()));
    PROVIDER.clone()
}

/// Trusts exactly one certificate, whoever presents it.
#[derive(Debug)]
struct Pinned {
    der: CertificateDer<'static>,
    provider: Arc<CryptoProvider>,
}

impl Pinned {
    fn new(peer: &CertificateDer<'static>) -> Arc<Pinned> {
        Arc::new(Pinned {
            der: peer.clone(),
            provider: provider(),
        })
    }

    fn algorithms(&self) -> &rustls::crypto::WebPkiSupportedAlgorithms {
        &self.provider.signature_verification_algorithms
    }

    fn check(&self, presented: &CertificateDer<'_>) -> Result<(), rustls::Error> {
        if presented.as_ref() == self.der.as_ref() {
            Ok(())
        } else {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::ApplicationVerificationFailure,
            ))
        }
    }
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.check(end_entity)
            .map(|()| ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, self.algorithms())
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, self.algorithms())
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms().supported_schemes()
    }
}

impl ClientCertVerifier for Pinned {
    fn root_hint_subjects(&self) -> &[TlsName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.check(end_entity)
            .map(|()| ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, self.algorithms())
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, self.algorithms())
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms().supported_schemes()
    }
}

/// TLS client settings: present `own`, trust only `peer`, ALPN h2 (grpc-go requires it).
pub fn client_config(
    own: &Identity,
    peer: &CertificateDer<'static>,
) -> Result<Arc<ClientConfig>, TlsError> {
    let verifier = Pinned::new(peer);
    let p = verifier.provider.clone();
    let mut config = ClientConfig::builder_with_provider(p)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_client_auth_cert(vec![own.cert.clone()], own.key())
        .map_err(|e| TlsError(e.to_string()))?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(config))
}

/// TLS server settings: present `own`, require a client certificate equal to `peer`, ALPN h2.
pub fn server_config(
    own: &Identity,
    peer: &CertificateDer<'static>,
) -> Result<Arc<ServerConfig>, TlsError> {
    let verifier = Pinned::new(peer);
    let p = verifier.provider.clone();
    let mut config = ServerConfig::builder_with_provider(p)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError(e.to_string()))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(vec![own.cert.clone()], own.key())
        .map_err(|e| TlsError(e.to_string()))?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(config))
}

/// The name both sides use for TLS (go-plugin's certificates are for `localhost`).
pub fn server_name() -> ServerName<'static> {
    ServerName::try_from("localhost").expect("invariant: localhost is a valid DNS name")
}
