//! What each rank publishes in the store: its host identity and where to reach it.
//!
//! ```text
//! hvd-tcp 1
//! host vm [192.0.2.2 fd00::2]
//! port 40123
//! wildcard yes
//! addr 192.0.2.2
//! ```
//! `wildcard` says the rank listens on every address, so a rank on the same host may use
//! loopback; `addr` lines are the addresses ranks on other hosts should dial.

use std::net::IpAddr;

const FIRST_LINE: &str = "hvd-tcp 1";

/// One rank's published endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    pub host: String,
    pub port: u16,
    pub wildcard: bool,
    pub addrs: Vec<IpAddr>,
}

impl Record {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut text = format!(
            "{FIRST_LINE}\nhost {}\nport {}\nwildcard {}\n",
            self.host,
            self.port,
            if self.wildcard { "yes" } else { "no" }
        );
        for addr in &self.addrs {
            text.push_str(&format!("addr {addr}\n"));
        }
        text.into_bytes()
    }

    /// Parses a record; `Err` says what is wrong with it.
    pub(crate) fn decode(bytes: &[u8]) -> Result<Record, String> {
        let text = std::str::from_utf8(bytes).map_err(|_| "it is not UTF-8 text".to_string())?;
        let mut lines = text.lines();
        if lines.next() != Some(FIRST_LINE) {
            return Err(format!("it does not start with {FIRST_LINE:?}"));
        }
        let (mut host, mut port, mut wildcard, mut addrs) = (None, None, false, Vec::new());
        for line in lines {
            let (key, value) = line.split_once(' ').unwrap_or((line, ""));
            let bad = || format!("bad line {line:?}");
            match key {
                "host" => host = Some(value.to_owned()),
                "port" => port = Some(value.parse::<u16>().map_err(|_| bad())?),
                "wildcard" => wildcard = value == "yes",
                "addr" => addrs.push(value.parse::<IpAddr>().map_err(|_| bad())?),
                _ => return Err(bad()),
            }
        }
        Ok(Record {
            host: host.ok_or("it has no host line")?,
            port: port.ok_or("it has no port line")?,
            wildcard,
            addrs,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let record = Record {
            host: "vm [192.0.2.2 fd00::2]".into(),
            port: 40123,
            wildcard: true,
            addrs: vec!["192.0.2.2".parse().unwrap(), "fd00::2".parse().unwrap()],
        };
        assert_eq!(Record::decode(&record.encode()), Ok(record));
    }

    #[test]
    fn malformed_records_say_what_is_wrong() {
        assert_eq!(
            Record::decode(b"hello"),
            Err("it does not start with \"hvd-tcp 1\"".into())
        );
        assert_eq!(
            Record::decode(b"hvd-tcp 1\nhost h\nport 99999\n"),
            Err("bad line \"port 99999\"".into())
        );
        assert_eq!(
            Record::decode(b"hvd-tcp 1\nhost h\n"),
            Err("it has no port line".into())
        );
    }
}
