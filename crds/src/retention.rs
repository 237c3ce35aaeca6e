//! The changelog's retention edge on Doris's clock (docs/doris-protocols.md §1.7): the one
//! arithmetic the runner's guard (milliseconds) and the operator's TTL headroom (seconds) share.
//! Saturating: a clock or a TTL at the ends of their ranges gives an edge at the end, never an
//! overflow.

/// The retention edge: changes committed at or before it are gone (epoch ms).
pub fn edge_ms(doris_now_ms: i64, ttl_seconds: u64) -> i64 {
    let ttl_ms = i64::try_from(ttl_seconds.saturating_mul(1000)).unwrap_or(i64::MAX);
    doris_now_ms.saturating_sub(ttl_ms)
}

/// Whole seconds before the changes committed at `oldest_ms` are gone: how far they stand
/// inside the [`edge_ms`], rounded up (0 at the edge, negative past it).
pub fn headroom_seconds(oldest_ms: i64, doris_now_ms: i64, ttl_seconds: u64) -> i64 {
    let inside_ms = oldest_ms.saturating_sub(edge_ms(doris_now_ms, ttl_seconds));
    inside_ms.div_euclid(1000) + i64::from(inside_ms.rem_euclid(1000) != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW_MS: i64 = 1_795_960_800_000;

    #[test]
    fn the_edge_is_the_ttl_before_now_and_saturates() {
        assert_eq!(edge_ms(NOW_MS, 600), NOW_MS - 600_000);
        assert_eq!(edge_ms(NOW_MS, u64::MAX), NOW_MS - i64::MAX);
        assert_eq!(edge_ms(i64::MIN, 1), i64::MIN);
    }

    #[test]
    fn headroom_counts_whole_seconds_inside_the_edge_rounded_up() {
        let edge = NOW_MS - 600_000;
        assert_eq!(headroom_seconds(edge, NOW_MS, 600), 0);
        assert_eq!(headroom_seconds(edge + 1, NOW_MS, 600), 1);
        assert_eq!(headroom_seconds(edge + 1000, NOW_MS, 600), 1);
        assert_eq!(headroom_seconds(edge - 1, NOW_MS, 600), 0);
        assert_eq!(headroom_seconds(edge - 1001, NOW_MS, 600), -1);
        assert_eq!(headroom_seconds(NOW_MS, NOW_MS, 600), 600);
        assert_eq!(
            headroom_seconds(i64::MAX, i64::MIN, u64::MAX),
            i64::MAX / 1000 + 1
        );
    }
}
