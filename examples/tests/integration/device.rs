//! `--device cuda` without a GPU: an error that names the option and says why, before
//! anything is written.

use rlgrad_cuda::Cuda;
use rlgrad_examples::cli::train_on_device;
use rlgrad_examples::device::DeviceKind;
use rlgrad_examples::off_policy::OffPolicy;
use rlgrad_examples::run::Options;
use rlgrad_examples::td3::{self, Td3};

#[test]
fn cuda_without_a_gpu_is_an_error_naming_the_option_and_why() {
    // With a GPU the run trains there: the GPU test (tests/gpu.rs) checks it.
    let Err(why) = Cuda::new(0) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        run_dir: Some(dir.path().join("run")),
        budget: 1,
        progress: false,
        device: DeviceKind::Cuda,
        ..Options::new::<OffPolicy<Td3>>(0)
    };
    let error = train_on_device(&options, &td3::Config::td3())
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("`--device`") && error.contains(&why.to_string()),
        "{error}"
    );
    assert!(!dir.path().join("run").exists(), "nothing is written");
}
