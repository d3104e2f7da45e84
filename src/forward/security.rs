//! Secrets and TLS for the broker connection: the password and the client key are read from files
//! that only their owner may read; TLS trusts exactly the configured CA (rustls, ring provider).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::config::MqttTls;

/// Why a secret or a TLS file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SecurityError {
    #[error("cannot read {what} {path}: {source}")]
    Read { what: &'static str, path: PathBuf, source: std::io::Error },
    #[error(
        "{what} {path} is readable by group or others (mode {mode:o}): a secret must be private \
         to its owner; run `chmod 600 {path}`"
    )]
    Exposed { what: &'static str, path: PathBuf, mode: u32 },
    #[error("{what} {path}: {why}")]
    Invalid { what: &'static str, path: PathBuf, why: String },
    #[error("TLS setup: {0}")]
    Tls(#[from] rustls::Error),
}

/// Where a secret named in the configuration lives: a bare name (no `/`) is looked up in
/// `credentials_dir` (systemd's `$CREDENTIALS_DIRECTORY`, for `LoadCredential=`) when that is set.
pub fn secret_path(configured: &Path, credentials_dir: Option<&Path>) -> PathBuf {
    let bare = configured.components().count() == 1 && !configured.is_absolute();
    match credentials_dir {
        Some(dir) if bare => dir.join(configured),
        _ => configured.to_path_buf(),
    }
}

/// Reads a secret file, refusing one that group or others may read.
pub fn read_secret(what: &'static str, path: &Path) -> Result<Vec<u8>, SecurityError> {
    let read_err = |source| SecurityError::Read { what, path: path.to_path_buf(), source };
    let mode = std::fs::metadata(path).map_err(read_err)?.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(SecurityError::Exposed { what, path: path.to_path_buf(), mode });
    }
    std::fs::read(path).map_err(read_err)
}

/// The password: the secret file's content without its trailing newline.
pub fn read_password(path: &Path) -> Result<String, SecurityError> {
    let bytes = read_secret("password file", path)?;
    let text = String::from_utf8(bytes).map_err(|_| SecurityError::Invalid {
        what: "password file",
        path: path.to_path_buf(),
        why: "not UTF-8".into(),
    })?;
    Ok(text.trim_end_matches(['\r', '\n']).to_owned())
}

fn certs(what: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, SecurityError> {
    let bytes = std::fs::read(path).map_err(|source| SecurityError::Read {
        what,
        path: path.to_path_buf(),
        source,
    })?;
    let invalid = |why: String| SecurityError::Invalid { what, path: path.to_path_buf(), why };
    let certs: Vec<_> = rustls_pemfile::certs(&mut bytes.as_slice())
        .collect::<Result<_, _>>()
        .map_err(|e| invalid(format!("not PEM certificates: {e}")))?;
    if certs.is_empty() {
        return Err(invalid("holds no PEM certificate".into()));
    }
    Ok(certs)
}

fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, SecurityError> {
    let what = "client key file";
    let bytes = read_secret(what, path)?;
    let invalid = |why: String| SecurityError::Invalid { what, path: path.to_path_buf(), why };
    rustls_pemfile::private_key(&mut bytes.as_slice())
        .map_err(|e| invalid(format!("not a PEM private key: {e}")))?
        .ok_or_else(|| invalid("holds no PEM private key".into()))
}

/// A rustls client configuration trusting only `tls.ca_file`, with the client certificate when
/// configured; ring is the only crypto provider.
pub fn client_config(
    tls: &MqttTls,
    credentials_dir: Option<&Path>,
) -> Result<Arc<rustls::ClientConfig>, SecurityError> {
    let mut roots = rustls::RootCertStore::empty();
    for c in certs("CA file", &tls.ca_file)? {
        roots.add(c)?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots);
    let config = match &tls.client_cert {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            let key = private_key(&secret_path(key, credentials_dir))?;
            builder.with_client_auth_cert(certs("client certificate file", cert)?, key)?
        }
    };
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_readable_by_others_are_refused_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("pw");
        std::fs::write(&p, "s3cret\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = read_password(&p).unwrap_err().to_string();
        assert!(e.contains("chmod 600") && e.contains("pw") && e.contains("644"), "{e}");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read_password(&p).unwrap(), "s3cret");
        let e = read_password(&dir.path().join("nope")).unwrap_err().to_string();
        assert!(e.contains("cannot read password file"), "{e}");
    }

    #[test]
    fn bare_names_come_from_the_credentials_directory() {
        let creds = Path::new("/run/credentials/linegate.service");
        assert_eq!(secret_path(Path::new("mqtt-pw"), Some(creds)), creds.join("mqtt-pw"));
        assert_eq!(secret_path(Path::new("/etc/pw"), Some(creds)), Path::new("/etc/pw"));
        assert_eq!(secret_path(Path::new("mqtt-pw"), None), Path::new("mqtt-pw"));
    }

    #[test]
    fn a_ca_file_without_certificates_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("ca.pem");
        std::fs::write(&p, "not pem").unwrap();
        let tls = MqttTls { ca_file: p, client_cert: None };
        let e = client_config(&tls, None).unwrap_err().to_string();
        assert!(e.contains("CA file") && e.contains("no PEM certificate"), "{e}");
    }
}
