//! The backlog's pace: a token bucket of `replay_rate` records per second holding at most a
//! tenth of a second's worth (at least one record). Pure: the time is given.

#[derive(Debug)]
pub(crate) struct Pace {
    /// Records per second; 0 means unpaced.
    rate: u32,
    tokens: f64,
    refilled_ms: i64,
}

impl Pace {
    pub(crate) fn new(rate: u32) -> Self {
        Pace { rate, tokens: 0.0, refilled_ms: 0 }
    }

    /// A new connection: one record may go at once.
    pub(crate) fn restart(&mut self, now_ms: i64) {
        self.tokens = 1.0;
        self.refilled_ms = now_ms;
    }

    pub(crate) fn refill(&mut self, now_ms: i64) {
        let rate = f64::from(self.rate);
        let elapsed = (now_ms - self.refilled_ms).max(0) as f64;
        let burst = (rate / 10.0).max(1.0);
        self.tokens = (self.tokens + elapsed * rate / 1000.0).min(burst);
        self.refilled_ms = now_ms;
    }

    /// How many backlog records may go now (`usize::MAX` unpaced); `None`: none.
    pub(crate) fn budget(&self) -> Option<usize> {
        match self.rate {
            0 => Some(usize::MAX),
            _ if self.tokens >= 1.0 => Some(self.tokens as usize),
            _ => None,
        }
    }

    /// `records` backlog records went.
    pub(crate) fn spend(&mut self, records: usize) {
        if self.rate > 0 {
            self.tokens -= records as f64;
        }
    }

    /// Milliseconds until a backlog record may go, while none may (paced only).
    pub(crate) fn wait_ms(&self) -> Option<i64> {
        (self.rate > 0 && self.tokens < 1.0)
            .then(|| ((1.0 - self.tokens) * 1000.0 / f64::from(self.rate)).ceil() as i64)
            .map(|ms| ms.max(1))
    }
}
