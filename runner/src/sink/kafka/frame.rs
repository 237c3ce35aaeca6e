//! Kafka messages in a load body: the pipeline's batcher holds bytes, a Kafka sink sends records,
//! so each message is one frame: the key and the value, each a little-endian `u64` length (with
//! `u64::MAX` for none: no key, or a tombstone's null value) followed by its bytes.

/// A message read back from a body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message<'a> {
    /// The record key (`None`: no key).
    pub key: Option<&'a [u8]>,
    /// The record value (`None`: a tombstone).
    pub value: Option<&'a [u8]>,
}

/// The length written for an absent key or value.
const ABSENT: u64 = u64::MAX;
/// The width of a length.
const LEN: usize = 8;

/// A body that is not a sequence of frames.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a Kafka load body is cut off at byte {at} of {len}")]
pub struct FrameError {
    /// Where the frame that does not fit starts.
    pub at: usize,
    /// The body's length.
    pub len: usize,
}

/// Append one message to `out`.
pub fn push(out: &mut Vec<u8>, key: Option<&[u8]>, value: Option<&[u8]>) {
    for part in [key, value] {
        match part {
            Some(bytes) => {
                out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
                out.extend_from_slice(bytes);
            }
            None => out.extend_from_slice(&ABSENT.to_le_bytes()),
        }
    }
}

/// Append one message whose key and value are written by `key` and `value` straight into `out`
/// (no copy); a writer returning `false` means none (and must have written nothing).
pub fn push_with(
    out: &mut Vec<u8>,
    key: impl FnOnce(&mut Vec<u8>) -> bool,
    value: impl FnOnce(&mut Vec<u8>) -> bool,
) {
    fn part(out: &mut Vec<u8>, write: impl FnOnce(&mut Vec<u8>) -> bool) {
        let at = out.len();
        out.extend_from_slice(&ABSENT.to_le_bytes());
        if write(out) {
            let len = (out.len() - at - LEN) as u64;
            out[at..at + LEN].copy_from_slice(&len.to_le_bytes());
        }
    }
    part(out, key);
    part(out, value);
}

/// The messages of `body`, in order.
///
/// # Errors
/// A frame that runs past the end of the body.
pub fn messages(body: &[u8]) -> Result<Vec<Message<'_>>, FrameError> {
    let mut out = Vec::new();
    let mut at = 0;
    let err = |start| FrameError {
        at: start,
        len: body.len(),
    };
    while at < body.len() {
        let start = at;
        let mut part = || -> Result<Option<&[u8]>, FrameError> {
            let len_bytes: [u8; LEN] = body
                .get(at..at + LEN)
                .and_then(|b| b.try_into().ok())
                .ok_or(err(start))?;
            at += LEN;
            let len = u64::from_le_bytes(len_bytes);
            if len == ABSENT {
                return Ok(None);
            }
            let end = usize::try_from(len)
                .ok()
                .and_then(|len| at.checked_add(len))
                .ok_or(err(start))?;
            let bytes = body.get(at..end).ok_or(err(start))?;
            at = end;
            Ok(Some(bytes))
        };
        let key = part()?;
        let value = part()?;
        out.push(Message { key, value });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_read_back_as_written_keys_values_and_tombstones() {
        let mut body = Vec::new();
        push(
            &mut body,
            Some(b"{\"id\":1}"),
            Some(b"{\"id\":1,\"v\":\"a\"}"),
        );
        push(&mut body, Some(b"{\"id\":1}"), None);
        push(&mut body, None, Some(b""));
        push_with(
            &mut body,
            |out| {
                out.extend_from_slice(b"k");
                true
            },
            |_| false,
        );
        assert_eq!(
            messages(&body).unwrap(),
            vec![
                Message {
                    key: Some(b"{\"id\":1}"),
                    value: Some(b"{\"id\":1,\"v\":\"a\"}")
                },
                Message {
                    key: Some(b"{\"id\":1}"),
                    value: None
                },
                Message {
                    key: None,
                    value: Some(b"")
                },
                Message {
                    key: Some(b"k"),
                    value: None
                },
            ]
        );
    }

    #[test]
    fn a_cut_off_body_is_an_error_not_a_panic() {
        let mut body = Vec::new();
        push(&mut body, Some(b"key"), Some(b"value"));
        let whole = body.len();
        push(&mut body, Some(b"key2"), Some(b"value2"));
        for cut in whole + 1..body.len() {
            assert_eq!(
                messages(&body[..cut]),
                Err(FrameError {
                    at: whole,
                    len: cut
                })
            );
        }
        assert_eq!(messages(&[]).unwrap(), vec![]);
        // A length past anything addressable.
        let huge = (u64::MAX - 1).to_le_bytes();
        assert_eq!(messages(&huge), Err(FrameError { at: 0, len: 8 }));
    }
}
