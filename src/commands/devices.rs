//! `edgesight devices`: every OpenCL platform and device, and the V4L2 capture devices.

use anyhow::Result;

use edgesight::capture::v4l2;
use edgesight::cl::{self, DeviceSpec, Gpu};
use edgesight::pipeline::Tuning;

pub(crate) fn devices() -> Result<()> {
    let opencl = opencl_devices();
    v4l2_devices();
    opencl
}

fn v4l2_devices() {
    println!("V4L2 capture devices:");
    let mut any = false;
    for node in v4l2::list::nodes() {
        match v4l2::list::describe(&node) {
            Ok(info) => {
                any = true;
                for line in v4l2::list::lines(&info) {
                    println!("  {line}");
                }
            }
            Err(why) => println!("  {}: {why}", node.display()),
        }
    }
    if !any {
        println!("  (none)");
    }
}

fn opencl_devices() -> Result<()> {
    let platforms = cl::list_devices()?;
    let default = Gpu::open(&DeviceSpec::Default).ok().map(|g| g.info.name);
    for (pi, p) in platforms.iter().enumerate() {
        let version = p
            .devices
            .first()
            .map(|(_, i)| i.platform_version.as_str())
            .unwrap_or("");
        println!("platform {pi}: {} ({version})", p.name);
        if p.devices.is_empty() {
            println!("  (no devices)");
        }
        for (di, (device, d)) in p.devices.iter().enumerate() {
            let mark = if default.as_deref() == Some(d.name.as_str()) {
                "  [default]"
            } else {
                ""
            };
            println!("  {pi}:{di} {} — {} ({}){mark}", d.name, d.kind, d.vendor);
            println!(
                "      version:            {} (driver {})",
                d.version, d.driver_version
            );
            println!("      OpenCL C:           {}", d.opencl_c_version);
            println!("      compute units:      {}", d.compute_units);
            println!("      local memory:       {} KiB", d.local_mem_bytes / 1024);
            println!(
                "      global memory:      {} MiB",
                d.global_mem_bytes / (1024 * 1024)
            );
            println!("      max work-group:     {}", d.max_work_group_size);
            println!(
                "      unified memory:     {}",
                d.unified_memory.map(yes_no).unwrap_or("unknown")
            );
            println!("      fp64:               {}", yes_no(d.fp64));
            println!(
                "      profiling:          {}",
                match cl::offers_profiling(device) {
                    Ok(true) => "yes (stage times from the device's clock)".to_string(),
                    Ok(false) => "no: the driver refuses profiling queues; stage times from \
                                  the host's clock"
                        .to_string(),
                    Err(e) => format!("unknown ({e})"),
                }
            );
            println!("      tuning (auto):      {}", Tuning::for_info(d).name());
        }
    }
    Ok(())
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}
