//! The allocation timeline as a table a reader can set beside the paper's
//! (Chameleon's Figure 8, events (a)-(d)): every moment the CPUs held by a
//! program's execution object changed or a program started or exited, what
//! happened then, the CPUs each program held afterwards, and the paper's
//! event it corresponds to.
//!
//! Paper events come from the scenario's `expect` list: an entry that
//! starts with a letter in parentheses and names a program and a verb,
//! `"(a) lbm starts: ..."`, is matched to the first start (or exit) of a
//! program with that label that no earlier entry took. Events are named as
//! the simulator names programs in timelines: the label, with `#n` when
//! several programs share it.

use std::collections::BTreeMap;

use dyncore_sim::RunResult;
use dyncore_sim::scenario::Scenario;

/// A program start or exit.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// e.g. "lbm starts", "astar#1 exits".
    pub what: String,
    /// The paper's event, e.g. ("a", "(a) lbm starts: the node manager ...").
    pub paper: Option<(String, String)>,
}

impl Event {
    /// "(a) lbm starts", or "astar#1 exits" when the paper names no event.
    pub fn short(&self) -> String {
        match &self.paper {
            Some((letter, _)) => format!("({letter}) {}", self.what),
            None => self.what.clone(),
        }
    }
}

/// One moment of the timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct TimelineRow {
    pub t_ns: u64,
    pub events: Vec<Event>,
    /// CPUs per program from this moment on, e.g. "astar#1: 4, lbm: 2".
    pub cpus: String,
}

/// A lettered paper event: (letter, program label, "starts" | "exits", text).
fn paper_events(scenario: &Scenario) -> Vec<(String, String, String, String)> {
    scenario
        .expect
        .iter()
        .filter_map(|e| {
            let e = e.text();
            let rest = e.strip_prefix('(')?;
            let (letter, rest) = rest.split_once(')')?;
            if letter.is_empty() || !letter.chars().all(|c| c.is_ascii_alphanumeric()) {
                return None;
            }
            let mut words = rest.split_whitespace();
            let (label, verb) = (words.next()?, words.next()?.trim_end_matches([':', ',', ';']));
            matches!(verb, "starts" | "exits")
                .then(|| (letter.into(), label.into(), verb.into(), e.to_string()))
        })
        .collect()
}

/// The timeline of `run`: a row per allocation sample and per program start
/// or exit, in time order.
pub fn timeline_rows(scenario: &Scenario, run: &RunResult) -> Vec<TimelineRow> {
    let mut per_label: BTreeMap<&str, usize> = BTreeMap::new();
    for p in &run.programs {
        *per_label.entry(p.label.as_str()).or_default() += 1;
    }
    // (time, order within the time, label, name, verb)
    let mut happenings: Vec<(u64, usize, &str, String, &str)> = Vec::new();
    for (i, p) in run.programs.iter().enumerate() {
        let name = if per_label[p.label.as_str()] > 1 {
            format!("{}#{}", p.label, p.instance + 1)
        } else {
            p.label.clone()
        };
        happenings.push((p.start_ns, i, &p.label, name.clone(), "starts"));
        if let Some(f) = p.finish_ns {
            happenings.push((f, run.programs.len() + i, &p.label, name, "exits"));
        }
    }
    happenings.sort();
    let mut paper = paper_events(scenario);
    let mut rows: BTreeMap<u64, Vec<Event>> = run.allocation.iter().map(|a| (a.t_ns, Vec::new())).collect();
    for (t, _, label, name, verb) in happenings {
        let matched = paper.iter().position(|(_, l, v, _)| l == label && v == verb).map(|i| paper.remove(i));
        rows.entry(t).or_default().push(Event {
            what: format!("{name} {verb}"),
            paper: matched.map(|(letter, _, _, text)| (letter, text)),
        });
    }
    rows.into_iter()
        .map(|(t_ns, events)| {
            let sample = run.allocation.iter().take_while(|a| a.t_ns <= t_ns).last();
            let cpus = sample.map_or(String::new(), |a| {
                a.cpus_by_program.iter().map(|(p, c)| format!("{p}: {c}")).collect::<Vec<_>>().join(", ")
            });
            TimelineRow { t_ns, events, cpus }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_events_need_a_letter_a_program_and_a_verb() {
        let sc = Scenario::from_toml(
            r#"
name = "t"
title = "t"
expect = ["Start: both get 4", "(a) lbm starts: 2 CPUs move", "(c) lbm exits, its CPUs go", "(b) sjeng wins"]
[[run]]
label = "a"
machine = "cmp"
policy = "linux"
[[run.workload]]
program = "gcc"
"#,
        )
        .unwrap();
        let got = paper_events(&sc);
        assert_eq!(got.len(), 2);
        assert_eq!((got[0].0.as_str(), got[0].1.as_str(), got[0].2.as_str()), ("a", "lbm", "starts"));
        assert_eq!((got[1].0.as_str(), got[1].1.as_str(), got[1].2.as_str()), ("c", "lbm", "exits"));
    }

    /// Figure 8's run: the four lettered events are found, each once, in
    /// the paper's order, at the program's start or exit.
    #[test]
    fn figure_8_events_are_matched_to_the_paper() {
        let text =
            std::fs::read_to_string(dyncore_scenario::load::default_dir().join("fig8-mixed-sequential.toml"))
                .unwrap();
        let sc = Scenario::from_toml(&text).unwrap();
        let run = dyncore_sim::run_one(&sc, 0).expect("within the event budget");
        let rows = timeline_rows(&sc, &run);
        let lettered: Vec<(String, u64)> = rows
            .iter()
            .flat_map(|r| {
                r.events.iter().filter_map(move |e| e.paper.as_ref().map(|(l, _)| (l.clone(), r.t_ns)))
            })
            .collect();
        let letters: Vec<&str> = lettered.iter().map(|(l, _)| l.as_str()).collect();
        assert_eq!(letters, vec!["a", "b", "c", "d"], "{rows:#?}");
        let lbm = run.programs.iter().find(|p| p.label == "lbm").unwrap();
        assert_eq!(lettered[0].1, lbm.start_ns);
        assert_eq!(lettered[2].1, lbm.finish_ns.unwrap());
        assert!(rows.windows(2).all(|w| w[0].t_ns < w[1].t_ns));
        assert!(rows[0].cpus.contains("astar#1"), "{:?}", rows[0]);
    }
}
