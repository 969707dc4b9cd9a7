//! Counting the statements sqlx executes, from sqlx's own per-statement events.
//!
//! sqlx emits one `tracing` event (target `sqlx::query`) each time a connection finishes
//! executing a statement, carrying its text. [`StatementLog::install`] makes a recorder
//! the process's global subscriber; a test then counts the statements that touched its
//! own table between two points. This counts at the driver, below every wrapper the
//! library has, so a hidden second statement (a read before a write, a retry) shows.

use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// The statements sqlx executed in this process since [`StatementLog::install`].
#[derive(Debug, Clone)]
pub struct StatementLog {
    statements: Arc<Mutex<Vec<String>>>,
}

struct Recorder {
    statements: Arc<Mutex<Vec<String>>>,
}

#[derive(Default)]
struct Text(String);

impl Visit for Text {
    fn record_str(&mut self, field: &Field, value: &str) {
        if matches!(field.name(), "summary" | "db.statement") {
            self.0.push_str(value);
            self.0.push(' ');
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if matches!(field.name(), "summary" | "db.statement") {
            self.0.push_str(&format!("{value:?} "));
        }
    }
}

impl Subscriber for Recorder {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.target() == "sqlx::query"
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut text = Text::default();
        event.record(&mut text);
        self.statements
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(text.0);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

impl StatementLog {
    /// Installs the recorder as the global subscriber (once per process; later calls
    /// return the same log). Panics if another global subscriber is already set.
    pub fn install() -> Self {
        static LOG: OnceLock<StatementLog> = OnceLock::new();
        LOG.get_or_init(|| {
            let statements = Arc::new(Mutex::new(Vec::new()));
            tracing::subscriber::set_global_default(Recorder {
                statements: statements.clone(),
            })
            .unwrap_or_else(|e| panic!("a global tracing subscriber is already set: {e}"));
            StatementLog { statements }
        })
        .clone()
    }

    /// How many statements were logged so far (a mark for [`StatementLog::since`]).
    pub fn mark(&self) -> usize {
        self.lock().len()
    }

    /// The statements logged since `mark` whose text contains `needle` (a table name).
    pub fn since(&self, mark: usize, needle: &str) -> Vec<String> {
        self.lock()
            .iter()
            .skip(mark)
            .filter(|s| s.contains(needle))
            .cloned()
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        self.statements
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
