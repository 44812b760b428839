//! Placement of a split network stack's components (NewtOS).

use serde::{Deserialize, Serialize};

/// The components of a NewtOS-style split network stack, in pipeline order
/// from the application to the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ComponentKind {
    /// The syscall server: applications' synchronous calls to messages.
    Syscall,
    /// TCP (smoltcp's sockets): the component that copies payload.
    Tcp,
    /// IP: checksums and header checks.
    Ip,
    /// The packet filter.
    Filter,
    /// The driver: frames between the stack and the wire.
    Driver,
}

impl ComponentKind {
    pub const ALL: [ComponentKind; 5] = [
        ComponentKind::Syscall,
        ComponentKind::Tcp,
        ComponentKind::Ip,
        ComponentKind::Filter,
        ComponentKind::Driver,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ComponentKind::Syscall => "syscall",
            ComponentKind::Tcp => "tcp",
            ComponentKind::Ip => "ip",
            ComponentKind::Filter => "filter",
            ComponentKind::Driver => "driver",
        }
    }
}

impl std::fmt::Display for ComponentKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for ComponentKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        ComponentKind::ALL.into_iter().find(|k| k.name() == s).ok_or_else(|| {
            let known: Vec<_> = ComponentKind::ALL.iter().map(|k| k.name()).collect();
            format!("unknown component `{s}`; known components: {}", known.join(", "))
        })
    }
}
