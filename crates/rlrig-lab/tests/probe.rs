//! The probe on fake /sys, /proc and /etc trees: an AMD card, no card, NVML absent,
//! and the JSON schema.

use std::fs;
use std::path::{Path, PathBuf};

use rlrig_lab::probe::{Found, Roots, probe};

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
}

/// A 4-thread, 2-core machine with 16 GiB; `amd` adds an AMD card and an Intel one.
fn fake_machine(name: &str, amd: bool) -> (PathBuf, Roots) {
    let root = std::env::temp_dir().join(format!("rlrig-probe-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&root);
    write(
        &root,
        "proc/cpuinfo",
        "processor\t: 0\nmodel name\t: Fake Ryzen 9 9999X\n",
    );
    write(
        &root,
        "proc/meminfo",
        "MemTotal:       16777216 kB\nMemFree: 1 kB\nMemAvailable:    8388608 kB\n",
    );
    write(&root, "proc/sys/kernel/osrelease", "6.1.0-fake\n");
    write(
        &root,
        "etc/os-release",
        "NAME=\"Fake\"\nPRETTY_NAME=\"Fake Linux 1\"\n",
    );
    write(&root, "sys/devices/system/cpu/online", "0-3\n");
    for cpu in 0..4 {
        let t = format!("sys/devices/system/cpu/cpu{cpu}/topology");
        write(&root, &format!("{t}/physical_package_id"), "0\n");
        write(&root, &format!("{t}/core_id"), &format!("{}\n", cpu / 2));
    }
    let c = "sys/devices/system/cpu/cpu0/cache/index0";
    write(&root, &format!("{c}/level"), "1\n");
    write(&root, &format!("{c}/type"), "Data\n");
    write(&root, &format!("{c}/size"), "32K\n");
    write(&root, &format!("{c}/shared_cpu_list"), "0-1\n");
    if amd {
        let d = "sys/class/drm/card0/device";
        write(&root, &format!("{d}/vendor"), "0x1002\n");
        write(&root, &format!("{d}/device"), "0x744c\n");
        write(&root, &format!("{d}/product_name"), "Radeon RX 7900 XTX\n");
        write(
            &root,
            &format!("{d}/mem_info_vram_total"),
            &format!("{}\n", 24u64 << 30),
        );
        write(
            &root,
            &format!("{d}/mem_info_vram_used"),
            &format!("{}\n", 512u64 << 20),
        );
        write(&root, &format!("{d}/gpu_busy_percent"), "37\n");
        write(&root, &format!("{d}/current_link_speed"), "2.5 GT/s PCIe\n");
        write(&root, &format!("{d}/current_link_width"), "1\n");
        write(&root, &format!("{d}/max_link_speed"), "16.0 GT/s PCIe\n");
        write(&root, &format!("{d}/max_link_width"), "16\n");
        write(&root, "sys/class/drm/card1/device/vendor", "0x8086\n");
        write(&root, "sys/class/drm/renderD128/dev", "226:128\n");
    }
    let roots = Roots {
        sys: root.join("sys"),
        proc_: root.join("proc"),
        etc: root.join("etc"),
        nvml: true,
    };
    (root, roots)
}

#[test]
fn an_amd_card_on_a_mining_riser_is_reported_with_its_link() {
    let (root, roots) = fake_machine("amd", true);
    let p = probe(&roots);
    assert_eq!(p.cpu.model, "Fake Ryzen 9 9999X");
    assert_eq!((p.cpu.logical_cores, p.cpu.physical_cores), (4, 2));
    assert_eq!(p.cpu.caches.len(), 1);
    assert_eq!(
        (p.cpu.caches[0].size_kib, p.cpu.caches[0].shared_by),
        (32, 2)
    );
    assert_eq!((p.memory.total_mib, p.memory.available_mib), (16384, 8192));
    assert_eq!(p.os.name, "Fake Linux 1");
    let Found::Present { devices } = &p.amd else {
        panic!("AMD card not found: {:?}", p.amd)
    };
    assert_eq!(devices.len(), 1, "the Intel card is not an AMD GPU");
    let g = &devices[0];
    assert_eq!(g.name, "Radeon RX 7900 XTX");
    assert_eq!(
        (g.vram_total_mib, g.vram_used_mib, g.busy_percent),
        (Some(24576), Some(512), Some(37))
    );
    assert_eq!(g.pcie.current, "2.5 GT/s PCIe x1");
    assert_eq!(g.pcie.max, "16.0 GT/s PCIe x16");
    assert!(
        p.report()
            .contains("PCIe 2.5 GT/s PCIe x1 (max 16.0 GT/s PCIe x16)"),
        "{}",
        p.report()
    );
    fs::remove_dir_all(root).ok();
}

#[test]
fn no_card_and_no_nvml_read_as_absent_not_as_errors() {
    let (root, roots) = fake_machine("none", false);
    let p = probe(&roots);
    assert!(
        matches!(&p.amd, Found::Absent { reason } if reason.contains("class/drm")),
        "{:?}",
        p.amd
    );
    // This test machine has no NVIDIA driver: NVML must fail softly.
    if std::path::Path::new("/proc/driver/nvidia").exists() {
        return;
    }
    assert!(
        matches!(&p.nvidia, Found::Absent { reason } if reason.contains("NVML")),
        "{:?}",
        p.nvidia
    );
    assert!(p.report().contains("NVIDIA   none"));
    fs::remove_dir_all(root).ok();
}

#[test]
fn probe_json_follows_its_schema() {
    let (root, roots) = fake_machine("schema", true);
    let v = serde_json::to_value(probe(&roots)).unwrap();
    let obj = |v: &serde_json::Value, keys: &[&str]| {
        for k in keys {
            assert!(v.get(k).is_some(), "missing '{k}' in {v}");
        }
    };
    obj(
        &v,
        &["schema", "cpu", "memory", "os", "nvidia", "amd", "wgpu"],
    );
    assert_eq!(v["schema"], 1);
    obj(
        &v["cpu"],
        &["model", "logical_cores", "physical_cores", "simd", "caches"],
    );
    assert!(v["cpu"]["logical_cores"].is_u64() && v["cpu"]["simd"].is_array());
    obj(
        &v["cpu"]["caches"][0],
        &["level", "kind", "size_kib", "shared_by"],
    );
    obj(&v["memory"], &["total_mib", "available_mib"]);
    obj(&v["os"], &["name", "kernel"]);
    for fam in ["nvidia", "amd", "wgpu"] {
        let s = v[fam]["status"].as_str().unwrap();
        match s {
            "present" => assert!(v[fam]["devices"].is_array()),
            "absent" => assert!(v[fam]["reason"].is_string()),
            other => panic!("{fam}: status {other}"),
        }
    }
    obj(
        &v["amd"]["devices"][0],
        &[
            "card",
            "name",
            "vram_total_mib",
            "vram_used_mib",
            "busy_percent",
            "pcie",
        ],
    );
    obj(&v["amd"]["devices"][0]["pcie"], &["current", "max"]);
    fs::remove_dir_all(root).ok();
}

#[test]
fn the_real_machine_probes_without_error() {
    let p = probe(&Roots::default());
    assert!(p.cpu.logical_cores >= 1);
    assert!(p.memory.total_mib > 0);
    assert!(!p.fingerprint().is_empty());
}

#[test]
fn gpu_utilisation_is_sampled_in_the_background() {
    let (root, mut roots) = fake_machine("sampler", true);
    roots.nvml = false;
    let s = rlrig_lab::probe::GpuSampler::start(roots.clone(), std::time::Duration::from_millis(5));
    // Waits for the sampler thread rather than sleeping a fixed time: on a loaded CI
    // machine a 5 ms sampler may not run for a while.
    let wait_for = |busy: f64| {
        let start = std::time::Instant::now();
        while s.latest().first().map(|l| l.1) != Some(busy)
            && start.elapsed() < std::time::Duration::from_secs(30)
        {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        s.latest()
    };
    assert_eq!(
        wait_for(37.0),
        vec![("amd:card0".to_string(), 37.0, Some(512.0))]
    );
    // The card gets busier half-way.
    fs::write(
        roots.sys.join("class/drm/card0/device/gpu_busy_percent"),
        "91\n",
    )
    .unwrap();
    assert_eq!(wait_for(91.0)[0].1, 91.0);
    let used = s.finish();
    assert_eq!(used.len(), 1);
    assert_eq!(used[0].gpu, "amd:card0");
    assert_eq!(used[0].max_busy_percent, 91.0);
    assert!(
        used[0].mean_busy_percent > 37.0 && used[0].mean_busy_percent < 91.0,
        "{used:?}"
    );
    assert!(used[0].samples >= 2);
    assert_eq!(used[0].max_memory_used_mib, Some(512.0));
    // No GPU: nothing sampled, nothing fails.
    let (root2, mut none) = fake_machine("sampler-none", false);
    none.nvml = false;
    assert!(
        rlrig_lab::probe::GpuSampler::start(none, std::time::Duration::from_millis(5))
            .finish()
            .is_empty()
    );
    fs::remove_dir_all(root).ok();
    fs::remove_dir_all(root2).ok();
}
