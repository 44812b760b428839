//! The frame audit: at rest, every frame one stack's TCP sent passed each
//! component on the way to the other stack's TCP exactly once.
//!
//! Each component counts what it passed on (committed in its journal, so a
//! crash never counts a frame twice, and a batch redone after a crash is
//! counted once). Along one direction of two stacks joined by an
//! unimpaired in-memory wire and without filter rules, the counts of
//! consecutive hops must be equal: a hop that counts fewer than the one
//! before it lost frames, one that counts more duplicated them. TCP would
//! repair either (it retransmits, and drops duplicates), so the stream's
//! digest alone could not show them; this can.

use crate::component::Component;

/// One hop of one direction: the count before it and after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hop {
    pub from: String,
    pub to: String,
    pub sent: u64,
    pub got: u64,
}

/// Both directions between two split stacks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Audit {
    pub hops: Vec<Hop>,
}

impl Audit {
    /// Audits two stacks' components, each in pipeline order (syscall, TCP,
    /// IP, filter, driver), at rest.
    pub fn of(a: &[&dyn Component], b: &[&dyn Component]) -> Audit {
        assert!(a.len() == 5 && b.len() == 5, "two stacks of five components");
        let mut hops = Vec::new();
        for (name, (x, y)) in [("A → B", (a, b)), ("B → A", (b, a))] {
            let c = |s: &[&dyn Component], i: usize, counter: &str| s[i].counters().get(counter);
            let path = [
                ("TCP sent", c(x, 1, "frames_out")),
                ("IP sent", c(x, 2, "sent")),
                ("filter passed out", c(x, 3, "passed_out")),
                ("driver sent", c(x, 4, "sent")),
                ("peer driver received", c(y, 4, "received")),
                ("peer filter passed in", c(y, 3, "passed_in")),
                ("peer IP received", c(y, 2, "received")),
                ("peer TCP received", c(y, 1, "frames_in")),
            ];
            for w in path.windows(2) {
                hops.push(Hop {
                    from: format!("{name}: {}", w[0].0),
                    to: w[1].0.to_string(),
                    sent: w[0].1,
                    got: w[1].1,
                });
            }
        }
        Audit { hops }
    }

    /// Frames a hop counted fewer of than the hop before it.
    pub fn lost(&self) -> u64 {
        self.hops.iter().map(|h| h.sent.saturating_sub(h.got)).sum()
    }

    /// Frames a hop counted more of than the hop before it.
    pub fn duplicated(&self) -> u64 {
        self.hops.iter().map(|h| h.got.saturating_sub(h.sent)).sum()
    }

    /// Frames TCP sent, both directions.
    pub fn frames(&self) -> u64 {
        self.hops.iter().filter(|h| h.to == "IP sent").map(|h| h.sent).sum()
    }

    /// The hops that do not balance, for a message.
    pub fn describe(&self) -> String {
        let bad: Vec<String> = self
            .hops
            .iter()
            .filter(|h| h.sent != h.got)
            .map(|h| format!("{} {} → {} {}", h.from, h.sent, h.to, h.got))
            .collect();
        if bad.is_empty() { "every hop balances".into() } else { bad.join("; ") }
    }
}
