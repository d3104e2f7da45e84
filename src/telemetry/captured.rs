//! For tests: what a `tracing` subscriber at trace level, with span closes, writes while a
//! closure runs (the stage spans' tests read their fields from it).

use std::io::Write;
use std::sync::{Arc, Mutex};

/// What a `tracing` subscriber wrote.
#[derive(Clone, Default)]
struct Written(Arc<Mutex<Vec<u8>>>);

impl Write for Written {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Runs `f` under a trace-level subscriber that also logs every span's close with its fields,
/// and returns what `f` returned and the text written.
pub(crate) fn trace_of<T>(f: impl FnOnce() -> T) -> (T, String) {
    let written = Written::default();
    let w = written.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
        .with_ansi(false)
        .with_writer(move || w.clone())
        .finish();
    let out = tracing::subscriber::with_default(subscriber, f);
    let text = String::from_utf8(written.0.lock().unwrap().clone()).unwrap();
    (out, text)
}
