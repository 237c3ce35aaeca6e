//! The DATETIME reader rule (docs/doris-protocols.md §3.5): Doris builds differ in how a DATETIME
//! travels over Arrow. With a time zone on the field the value is a UTC epoch and the wall clock is
//! its local time in that zone; without one the value already holds the wall-clock digits. Both
//! are normalised here to "wall clock as UTC, no zone", which is what the encoders print.

use std::sync::Arc;

use arrow_array::types::{
    ArrowTimestampType, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType,
};
use arrow_array::{Array, ArrayRef, PrimitiveArray};
use arrow_schema::{DataType, TimeUnit};
use jiff::tz::TimeZone;

use crate::time_zone::parse_zone;

use crate::{Error, Result};

/// Normalise a timestamp column to wall-clock-as-UTC without a zone; other columns pass through.
///
/// # Errors
/// When the column's zone is unknown or a value is out of range.
pub fn normalize_timestamp_column(column: &ArrayRef) -> Result<ArrayRef> {
    let DataType::Timestamp(unit, Some(tz)) = column.data_type() else {
        return Ok(column.clone());
    };
    let zone = parse_zone(tz)?;
    Ok(match unit {
        TimeUnit::Second => shift::<TimestampSecondType>(column, &zone, 1)?,
        TimeUnit::Millisecond => shift::<TimestampMillisecondType>(column, &zone, 1_000)?,
        TimeUnit::Microsecond => shift::<TimestampMicrosecondType>(column, &zone, 1_000_000)?,
        TimeUnit::Nanosecond => shift::<TimestampNanosecondType>(column, &zone, 1_000_000_000)?,
    })
}

fn shift<T: ArrowTimestampType>(
    column: &ArrayRef,
    zone: &TimeZone,
    per_second: i64,
) -> Result<ArrayRef> {
    let values = column
        .as_any()
        .downcast_ref::<PrimitiveArray<T>>()
        .ok_or_else(|| Error::UnexpectedResult {
            context: "DATETIME column".into(),
            reason: format!("{} is not a timestamp array", column.data_type()),
        })?;
    let out: PrimitiveArray<T> = values
        .try_unary(|v| {
            let secs = v.div_euclid(per_second);
            let ts = jiff::Timestamp::from_second(secs)
                .map_err(|e| arrow_schema::ArrowError::ComputeError(e.to_string()))?;
            let offset = i64::from(zone.to_offset(ts).seconds());
            v.checked_add(offset * per_second).ok_or_else(|| {
                arrow_schema::ArrowError::ComputeError(format!("timestamp {v} out of range"))
            })
        })
        .map_err(|e| Error::UnexpectedResult {
            context: "DATETIME column".into(),
            reason: e.to_string(),
        })?;
    Ok(Arc::new(out.with_timezone_opt(None::<String>)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::TimestampSecondArray;

    #[test]
    fn zoned_values_become_local_wall_clock() {
        // Doris FAQ 9: 17:23:28 in a +08:00 session arrives as 1740993808 s = 09:23:28Z.
        let col: ArrayRef = Arc::new(
            TimestampSecondArray::from(vec![Some(1_740_993_808), None]).with_timezone("+08:00"),
        );
        let out = normalize_timestamp_column(&col).unwrap();
        assert_eq!(
            out.data_type(),
            &DataType::Timestamp(TimeUnit::Second, None)
        );
        let out = out.as_any().downcast_ref::<TimestampSecondArray>().unwrap();
        assert_eq!(out.value(0), 1_740_993_808 + 8 * 3600);
        assert!(out.is_null(1));
    }

    #[test]
    fn unzoned_values_keep_their_digits() {
        let col: ArrayRef = Arc::new(TimestampSecondArray::from(vec![1_740_993_808]));
        let out = normalize_timestamp_column(&col).unwrap();
        assert_eq!(&out, &col);
    }

    #[test]
    fn zones_parse() {
        assert!(parse_zone("Z").is_ok());
        assert!(parse_zone("-05:30").is_ok());
        assert!(parse_zone("Asia/Shanghai").is_ok());
        assert!(parse_zone("Mars/Olympus").is_err());
    }
}
