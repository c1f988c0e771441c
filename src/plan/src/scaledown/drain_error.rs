//! Why a drain fails, as values: a pod that cannot move (and why), or a pod the snapshot
//! could not take off its node. A leaf: the scale-down reasons hold these values and the
//! drain simulation makes them, so neither has to import the other.

use std::fmt;

/// Why a node's pods cannot all be placed elsewhere.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DrainError {
    /// This pod fits on no other node.
    #[error("pod {pod} cannot move: {why}")]
    CannotMove {
        /// `namespace/name`.
        pod: String,
        /// Why not.
        why: MoveFailure,
    },
    /// The snapshot could not take a pod off its node (the words of the snapshot's error).
    #[error("{0}")]
    Unbind(String),
}

/// Why one pod fits on no other node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MoveFailure {
    /// No other node is a destination.
    NoOtherNode,
    /// Every other node refuses it: `(nodes, reason)` for the most frequent refusals, most
    /// frequent first, and how many more distinct reasons there were.
    Refused {
        /// The reasons shown, with how many nodes gave each.
        shown: Vec<(usize, String)>,
        /// Distinct reasons left out.
        more: usize,
    },
    /// The fit engine fails the pod wherever it goes (its claims do not resolve, or a
    /// verdict that holds on every node): its words.
    Unplaceable(String),
}

impl fmt::Display for MoveFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoOtherNode => f.write_str("no other node to move to"),
            Self::Unplaceable(words) => f.write_str(words),
            Self::Refused { shown, more } => {
                f.write_str("no other node fits it (")?;
                for (i, (n, reason)) in shown.iter().enumerate() {
                    if i > 0 {
                        f.write_str("; ")?;
                    }
                    let nodes = if *n == 1 { "node" } else { "nodes" };
                    write!(f, "{n} {nodes}: {reason}")?;
                }
                if *more > 0 {
                    write!(f, "; {more} more reasons")?;
                }
                f.write_str(")")
            }
        }
    }
}

/// `12 node: ` or `3 nodes: ` at the start of `text`: the count and the rest.
fn counted(text: &str) -> Option<(usize, &str)> {
    let (n, rest) = text.split_once(' ')?;
    let n: usize = n.parse().ok()?;
    let rest = rest
        .strip_prefix("nodes: ")
        .or_else(|| rest.strip_prefix("node: "))?;
    Some((n, rest))
}

impl MoveFailure {
    /// Reads the words `Display` writes (words of neither list form are the fit engine's).
    #[must_use]
    pub fn parse(words: &str) -> Self {
        if words == "no other node to move to" {
            return Self::NoOtherNode;
        }
        let Some(list) = words
            .strip_prefix("no other node fits it (")
            .and_then(|l| l.strip_suffix(')'))
        else {
            return Self::Unplaceable(words.into());
        };
        // Entries are split at "; " only where a count follows, since a fit reason may hold
        // "; " itself.
        let mut shown: Vec<(usize, String)> = Vec::new();
        let mut more = 0;
        let mut rest = list;
        while let Some((n, after)) = counted(rest) {
            let mut end = after.len();
            let mut tail = None;
            let mut from = 0;
            while let Some(at) = after[from..].find("; ") {
                let next = &after[from + at + 2..];
                if counted(next).is_some() {
                    end = from + at;
                    tail = Some(next);
                    break;
                }
                if let Some(m) = next
                    .strip_suffix(" more reasons")
                    .and_then(|m| m.parse().ok())
                {
                    end = from + at;
                    more = m;
                    break;
                }
                from += at + 2;
            }
            shown.push((n, after[..end].to_string()));
            match tail {
                Some(next) => rest = next,
                None => break,
            }
        }
        if shown.is_empty() {
            return Self::Unplaceable(words.into());
        }
        Self::Refused { shown, more }
    }
}

impl DrainError {
    /// Reads the words `Display` writes for [`DrainError::CannotMove`].
    #[must_use]
    pub fn parse(words: &str) -> Option<Self> {
        let (pod, why) = words.strip_prefix("pod ")?.split_once(" cannot move: ")?;
        Some(Self::CannotMove {
            pod: pod.into(),
            why: MoveFailure::parse(why),
        })
    }
}
