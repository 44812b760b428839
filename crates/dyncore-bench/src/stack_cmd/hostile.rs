//! Hostile values in every flag of `dyncore stack` (issue 21, classes 2
//! and 8): each is refused in our words (clap's frame, our reason; exit
//! status 2 either way) or makes a plan that can run; nothing panics, and
//! no time overflows a `Duration` or an `Instant`.
//!
//! Every flag gets every value of [`EXTREMES`] and of its own hostile list,
//! as `--flag VALUE` and `--flag=VALUE`, through the same steps as the
//! command before it starts anything: clap, [`plan`], the filter check.

use clap::Parser;

use super::args::{Args, plan};
use super::{MEM_ADDRS, stream_passes};
use dyncore_net::filter::Rule;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: Args,
}

/// Values every flag gets.
const EXTREMES: [&str; 16] = [
    "0",
    "-1",
    "-0",
    "1e300",
    "1e-300",
    "0.5",
    "18446744073709551615",
    "18446744073709551616",
    "9223372036854775807",
    "-9223372036854775808",
    "nan",
    "inf",
    "",
    "x",
    " 7",
    "\u{0}",
];

/// Each flag with values of its own.
const FLAGS: [(&str, &[&str]); 20] = [
    ("--wire", &["mem", "tun", "both"]),
    ("--peer", &["split", "mono", "linux"]),
    ("--bytes", &["16E", "17179869184G", "1K", "0K", "-1M"]),
    ("--mtu", &["575", "576", "65535", "65536"]),
    ("--cpus", &["0-18446744073709551615", "99999", "0-65536", ",", "1-0"]),
    (
        "--placement",
        &[
            "efficient:1e300",
            "efficient:1e-300",
            "efficient:nan",
            "manual:ip=0,ip=0",
            "manual:ip=18446744073709551616",
            "manual:",
            "spread:",
        ],
    ),
    ("--speed", &["0=2267,1=1867", "0=2267,0=1600", "0=1e300", "18446744073709551616=2267", "0=", "=2267"]),
    (
        "--at",
        &[
            "1e300s:crash=ip",
            "18446744073709551616ms:crash=ip",
            "1e-300s:crash=ip",
            "-1s:crash=ip",
            "86401s:crash=ip",
            "nan:crash=ip",
            "2s:speed=0=2267,1=1867",
            "2s:move=ip=18446744073709551616",
            "2s:update=filter@18446744073709551616",
            "2s:placement=manual:tcp=0,tcp=0",
            "2s:",
            ":",
        ],
    ),
    ("--streams", &["64", "65"]),
    ("--tcp-crash", &["reset", "recover", "ignore"]),
    ("--faults", &["1", "10000"]),
    ("--seed", &["1"]),
    ("--fault-gap-us", &["60000000", "60000001"]),
    ("--sample-ms", &["60000", "60001"]),
    ("--trace", &["/dev/null"]),
    ("--filter", &["deny", "deny any", "deny in", "deny out tcp", "deny in tcp dport 70000", "allow"]),
    ("--crash", &["nic", "tcp", "ip"]),
    ("--crash-every-ms", &["3600000", "3600001"]),
    ("--limit-s", &["86400", "86401"]),
    ("--peer", &["mono"]),
];

/// Words that are Rust's, serde's or clap's advice, not ours.
const NOT_OURS: [&str; 9] = [
    "number too large",
    "invalid digit",
    "ParseIntError",
    "ParseFloatError",
    "cannot parse",
    "..=",
    "-- -1",
    "panicked",
    "Some(",
];

fn ours(text: &str) -> Result<(), String> {
    match NOT_OURS.iter().find(|w| text.contains(**w)) {
        Some(w) => Err(format!("`{w}` in: {text}")),
        None => Ok(()),
    }
}

/// What a command line came to: refused by clap, refused by the checks,
/// or a plan that can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Clap,
    Refused,
    Plan,
}

fn case(argv: &[&str]) -> Result<Outcome, String> {
    let mut full = vec!["stack"];
    full.extend_from_slice(argv);
    let cli = match Cli::try_parse_from(&full) {
        Err(e) => {
            ours(&e.to_string())?;
            return Ok(Outcome::Clap);
        }
        Ok(c) => c,
    };
    let a = cli.args;
    let checked = (|| {
        let rules: Vec<Rule> =
            a.filters.iter().map(|r| Rule::parse(r)).collect::<Result<_, _>>().map_err(super::BadArgs)?;
        super::crash_kinds(&a.crash)?;
        let p = plan(&a)?;
        stream_passes(&rules, MEM_ADDRS.0, MEM_ADDRS.1, p.streams)?;
        // The times a run would compute from the flags.
        let now = std::time::Instant::now();
        let _ = now + std::time::Duration::from_secs(a.limit_s);
        let _ = now + std::time::Duration::from_millis(a.crash_every_ms());
        let _ = now + std::time::Duration::from_millis(a.sample_ms);
        let _ = now + std::time::Duration::from_micros(a.fault_gap_us());
        for (t, _) in &p.at {
            let _ = now + *t;
        }
        Ok::<_, super::BadArgs>(())
    })();
    match checked {
        Err(e) => {
            ours(&e.0)?;
            if e.0.trim().is_empty() {
                return Err("refused without a reason".into());
            }
            Ok(Outcome::Refused)
        }
        Ok(()) => Ok(Outcome::Plan),
    }
}

#[test]
fn every_flag_with_every_hostile_value_is_refused_in_our_words_or_plans() {
    let mut counts = [0usize; 3];
    let mut n = 0;
    for (flag, own) in FLAGS {
        for v in EXTREMES.iter().chain(own.iter()) {
            let joined = format!("{flag}={v}");
            for argv in [vec![flag, *v], vec![joined.as_str()]] {
                n += 1;
                match case(&argv) {
                    Ok(o) => counts[o as usize] += 1,
                    Err(e) => panic!("{argv:?}: {e}"),
                }
            }
        }
    }
    eprintln!(
        "{n} hostile command lines: {} refused by the parser, {} by the checks, {} planned",
        counts[0], counts[1], counts[2]
    );
    assert!(counts.iter().all(|&c| c > 0), "{counts:?}");
}

/// The refusals issue 21 names, each with the reason in its words.
#[test]
fn the_named_options_are_refused_with_their_reason() {
    let refused = |argv: &[&str], needle: &str| {
        let mut full = vec!["stack"];
        full.extend_from_slice(argv);
        let msg = match Cli::try_parse_from(&full) {
            Err(e) => e.to_string(),
            Ok(c) => {
                let a = c.args;
                let rules: Vec<Rule> = a.filters.iter().map(|r| Rule::parse(r).unwrap()).collect();
                match plan(&a).and_then(|p| stream_passes(&rules, MEM_ADDRS.0, MEM_ADDRS.1, p.streams)) {
                    Err(e) => e.0,
                    Ok(()) => panic!("{argv:?} was accepted"),
                }
            }
        };
        assert!(msg.contains(needle), "{argv:?}: no `{needle}` in {msg}");
    };
    refused(&["--speed", "0=2267,1=1867"], "the chip runs at one frequency");
    refused(&["--at", "1s:speed=0=1600,1=1867"], "the chip runs at one frequency");
    refused(&["--crash-every-ms", "0"], "expected a whole number from 1 to 3600000; found 0");
    refused(&["--limit-s", "0"], "expected a whole number from 1 to 86400; found 0");
    refused(&["--faults", "0"], "expected a whole number of at least 1; found 0");
    refused(
        &["--seed", "18446744073709551616"],
        "from 0 to 18446744073709551615; found 18446744073709551616",
    );
    refused(&["--limit-s", "-1"], "found -1");
    refused(&["--placement", "manual:tcp=0,tcp=0"], "tcp is placed twice");
    refused(&["--filter", "deny"], "drops the stream");
    refused(&["--filter", "deny out tcp"], "matches the segments of connection 0");
    refused(&["--filter", "deny in"], "matches the ACKs of connection 0");
    refused(&["--at", "1e300s:crash=ip"], "later than a run may last");
    refused(&["--at", "-1s:crash=ip"], "is not a time");
    // A flag that only means something beside another one.
    refused(&["--crash-every-ms", "5"], "--crash-every-ms does nothing without --crash COMP");
    refused(&["--seed", "7"], "--seed does nothing without --faults N");
    refused(&["--fault-gap-us", "50"], "--fault-gap-us does nothing without --faults N");
    let beside = |argv: &[&str]| plan(&Cli::try_parse_from(argv).unwrap().args).map(|_| ());
    assert!(beside(&["stack", "--crash", "ip", "--crash-every-ms", "5"]).is_ok());
    assert!(
        beside(&["stack", "--faults", "3", "--peer", "split", "--seed", "7", "--fault-gap-us", "50"]).is_ok()
    );
    // A rule for other traffic leaves the stream alone.
    let c = Cli::try_parse_from(["stack", "--filter", "deny in tcp dport 23"]).unwrap();
    let rules: Vec<Rule> = c.args.filters.iter().map(|r| Rule::parse(r).unwrap()).collect();
    assert!(stream_passes(&rules, MEM_ADDRS.0, MEM_ADDRS.1, 4).is_ok());
}
