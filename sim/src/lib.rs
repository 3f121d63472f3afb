//! ncclprof-sim: a fake NCCL core that dlopens a profiler plugin and drives it.
pub mod abi;
