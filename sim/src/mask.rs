//! Which events the core starts for a given activation mask (spec §4.9, the ancestor rule).

use crate::abi::ev;

/// Event kinds, in the order of their mask bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Group = 0,
    Coll,
    P2p,
    ProxyOp,
    ProxyStep,
    ProxyCtrl,
    KernelCh,
    NetPlugin,
    GroupApi,
    CollApi,
    P2pApi,
    KernelLaunch,
    CeColl,
    CeSync,
    CeBatch,
}

impl Kind {
    /// All kinds, in bit order.
    pub const ALL: [Kind; 15] = [
        Kind::Group,
        Kind::Coll,
        Kind::P2p,
        Kind::ProxyOp,
        Kind::ProxyStep,
        Kind::ProxyCtrl,
        Kind::KernelCh,
        Kind::NetPlugin,
        Kind::GroupApi,
        Kind::CollApi,
        Kind::P2pApi,
        Kind::KernelLaunch,
        Kind::CeColl,
        Kind::CeSync,
        Kind::CeBatch,
    ];

    /// The event's own type bit.
    pub fn bit(self) -> u64 {
        1u64 << (self as u32)
    }

    /// The name used in the truth file's `counts`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Group => "Group",
            Kind::Coll => "Coll",
            Kind::P2p => "P2p",
            Kind::ProxyOp => "ProxyOp",
            Kind::ProxyStep => "ProxyStep",
            Kind::ProxyCtrl => "ProxyCtrl",
            Kind::KernelCh => "KernelCh",
            Kind::NetPlugin => "NetPlugin",
            Kind::GroupApi => "GroupApi",
            Kind::CollApi => "CollApi",
            Kind::P2pApi => "P2pApi",
            Kind::KernelLaunch => "KernelLaunch",
            Kind::CeColl => "CeColl",
            Kind::CeSync => "CeSync",
            Kind::CeBatch => "CeBatch",
        }
    }

    /// The bits that make the core start this event: its own bit or any descendant's.
    pub fn trigger_bits(self) -> u64 {
        use ev::*;
        match self {
            Kind::GroupApi => 0x7FFF & !PROXY_CTRL,
            Kind::CollApi => {
                COLL_API
                    | COLL
                    | PROXY_OP
                    | PROXY_STEP
                    | KERNEL_CH
                    | NET_PLUGIN
                    | CE_COLL
                    | CE_SYNC
                    | CE_BATCH
            }
            Kind::P2pApi => P2P_API | P2P | PROXY_OP | PROXY_STEP | KERNEL_CH | NET_PLUGIN,
            Kind::KernelLaunch => KERNEL_LAUNCH,
            Kind::Group => GROUP | COLL | P2P | PROXY_OP | PROXY_STEP | KERNEL_CH | NET_PLUGIN,
            Kind::Coll => COLL | PROXY_OP | PROXY_STEP | KERNEL_CH | NET_PLUGIN,
            Kind::P2p => P2P | PROXY_OP | PROXY_STEP | KERNEL_CH | NET_PLUGIN,
            Kind::ProxyOp => PROXY_OP | PROXY_STEP | NET_PLUGIN,
            Kind::ProxyStep => PROXY_STEP | NET_PLUGIN,
            Kind::NetPlugin => NET_PLUGIN,
            Kind::KernelCh => KERNEL_CH,
            Kind::ProxyCtrl => PROXY_CTRL,
            Kind::CeColl => CE_COLL | CE_SYNC | CE_BATCH,
            Kind::CeSync => CE_SYNC,
            Kind::CeBatch => CE_BATCH,
        }
    }

    /// First API version able to receive this event.
    pub fn min_version(self) -> u32 {
        match self {
            Kind::Group
            | Kind::Coll
            | Kind::P2p
            | Kind::ProxyOp
            | Kind::ProxyStep
            | Kind::ProxyCtrl => 1,
            Kind::KernelCh | Kind::NetPlugin => 3,
            Kind::GroupApi | Kind::CollApi | Kind::P2pApi | Kind::KernelLaunch => 5,
            Kind::CeColl | Kind::CeSync | Kind::CeBatch => 6,
        }
    }
}

/// Whether the core starts an event of `kind` under `mask` (ancestor rule, §4.9).
pub fn wants(kind: Kind, mask: u64) -> bool {
    mask & kind.trigger_bits() != 0
}

/// The mask bits a given API version knows.
pub fn version_bits(version: u32) -> u64 {
    Kind::ALL
        .iter()
        .filter(|k| k.min_version() <= version)
        .fold(0, |m, k| m | k.bit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_match_spec() {
        assert_eq!(Kind::CeBatch.bit(), 16384);
        assert_eq!(Kind::KernelLaunch.bit(), 2048);
        assert_eq!(version_bits(5), 0xFFF);
        assert_eq!(version_bits(6), 0x7FFF);
        assert_eq!(version_bits(2), 0x3F);
        assert_eq!(version_bits(3), 0xFF);
    }

    #[test]
    fn ancestor_rule_proxy_op_only() {
        // spec §4.9: mask = 8 yields GroupApi, CollApi/P2pApi, Group, Coll/P2p, ProxyOp, nothing else.
        let m = ev::PROXY_OP;
        for k in Kind::ALL {
            let expect = matches!(
                k,
                Kind::GroupApi
                    | Kind::CollApi
                    | Kind::P2pApi
                    | Kind::Group
                    | Kind::Coll
                    | Kind::P2p
                    | Kind::ProxyOp
            );
            assert_eq!(wants(k, m), expect, "{k:?}");
        }
    }

    #[test]
    fn ancestor_rule_misc() {
        assert!(!wants(Kind::GroupApi, ev::PROXY_CTRL));
        assert!(wants(Kind::ProxyCtrl, ev::PROXY_CTRL));
        assert!(wants(Kind::ProxyStep, ev::NET_PLUGIN));
        assert!(wants(Kind::ProxyOp, ev::NET_PLUGIN));
        assert!(!wants(Kind::KernelLaunch, ev::COLL));
        assert!(wants(Kind::CollApi, ev::CE_BATCH));
        assert!(!wants(Kind::P2pApi, ev::CE_BATCH));
        assert!(wants(Kind::CeColl, ev::CE_SYNC));
        assert!(!wants(Kind::CeSync, ev::CE_BATCH));
        assert!(wants(Kind::GroupApi, ev::KERNEL_LAUNCH));
        assert!(!wants(Kind::Coll, ev::P2P));
        assert!(wants(Kind::Group, ev::KERNEL_CH));
        assert!(!wants(Kind::Group, ev::KERNEL_LAUNCH));
        for k in Kind::ALL {
            assert!(!wants(k, 0));
        }
    }
}
