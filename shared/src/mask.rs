//! Activation-mask bits (NCCL's `ncclProfile*` values, spec §2.2) with user-facing names.

use crate::kind::EventKind;

/// Every bit NCCL defines up to API v6 (RCCL's ProxyDiag bit 1<<15 is deliberately excluded:
/// a plugin must never set a bit it does not handle).
pub const ALL_V6: u32 = 0x7FFF;
/// Bits an API version can receive (spec §2.2): v1/v2 bits 0–5, v3/v4 add 6–7, v5 adds 8–11,
/// v6 adds 12–14.
pub fn supported_by_api(api_version: u32) -> u32 {
    match api_version {
        0..=2 => 0x3F,
        3 | 4 => 0xFF,
        5 => 0xFFF,
        _ => ALL_V6,
    }
}

/// The default mask when `NCCL_PROFILE_EVENT_MASK` is unset: the API layer, collectives and
/// p2p, proxy ops and steps (the proxy view), kernel channels (GPU timings) and CE collectives.
/// Leaves out Group (redundant with GroupApi from v5), ProxyCtrl (very frequent, little
/// diagnostic value), NetPlugin (one event per work request) and KernelLaunch.
pub const DEFAULT: u32 = (1 << EventKind::GroupApi as u32)
    | (1 << EventKind::CollApi as u32)
    | (1 << EventKind::P2pApi as u32)
    | (1 << EventKind::Coll as u32)
    | (1 << EventKind::P2p as u32)
    | (1 << EventKind::ProxyOp as u32)
    | (1 << EventKind::ProxyStep as u32)
    | (1 << EventKind::KernelCh as u32)
    | (1 << EventKind::CeColl as u32);

/// Names of the bits set in `mask`, in bit order.
pub fn names(mask: u32) -> Vec<&'static str> {
    EventKind::ALL
        .iter()
        .filter(|k| mask & k.bit() != 0)
        .map(|k| k.name())
        .collect()
}

/// Parse a mask as NCCL's example plugin does (decimal), also accepting `0x` hex and a
/// comma-separated list of kind names (`Coll,ProxyStep`). Unknown bits are rejected.
pub fn parse(text: &str) -> Result<u32, String> {
    let t = text.trim();
    let value = if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        u32::from_str_radix(hex, 16).map_err(|e| format!("bad hex mask {t:?}: {e}"))?
    } else if let Ok(v) = t.parse::<i64>() {
        u32::try_from(v).map_err(|_| format!("mask {t:?} out of range"))?
    } else {
        let mut m = 0;
        for name in t.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let k = EventKind::ALL
                .iter()
                .find(|k| k.name().eq_ignore_ascii_case(name))
                .ok_or_else(|| format!("unknown event kind {name:?} in mask {t:?}"))?;
            m |= k.bit();
        }
        m
    };
    if value & !ALL_V6 != 0 {
        return Err(format!(
            "mask {t:?} sets bits NCCL does not define (allowed: 0..=0x{ALL_V6:x})"
        ));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_mask_value() {
        assert_eq!(DEFAULT, 5982);
        assert_eq!(supported_by_api(1), 63);
        assert_eq!(supported_by_api(5), 4095);
        assert_eq!(supported_by_api(6), 0x7FFF);
    }

    #[test]
    fn parse_forms() {
        assert_eq!(parse("6"), Ok(6));
        assert_eq!(parse("0x7fff"), Ok(0x7FFF));
        assert_eq!(parse("Coll, proxystep"), Ok(2 | 16));
        assert!(parse("32768").is_err());
        assert!(parse("-1").is_err());
        assert!(parse("Bogus").is_err());
        assert_eq!(names(2 | 16), vec!["Coll", "ProxyStep"]);
    }
}
