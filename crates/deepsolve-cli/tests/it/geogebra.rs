//! `geogebra_analysis` through the real binary against the mock model: a text-only
//! construction is drawn (its figure model's misspelt command repaired in the one repair
//! round), saved in the turn's workspace as our own rendering of the validated commands,
//! listed by the CLI, and the answer uses the figure's table.

use std::path::PathBuf;

use deepsolve_testkit::MockServer;
use deepsolve_testkit::policy::{FIGURE_COMMANDS, GEOGEBRA_PROBLEM, Geogebra, MISSPELT};

use crate::support::Isolated;

/// The one turn workspace of `env`'s runs.
fn workspace(env: &Isolated) -> PathBuf {
    let turns = env.data().join("deepsolve/turns");
    let dirs: Vec<PathBuf> = std::fs::read_dir(&turns)
        .unwrap_or_else(|e| panic!("{}: {e}", turns.display()))
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].clone()
}

#[test]
fn a_described_construction_is_drawn_saved_listed_and_used_in_the_answer() {
    let server = MockServer::policy(Geogebra);
    let env = Isolated::new();
    let out = env
        .solve(&server)
        .args(["--tool", "geogebra_analysis", GEOGEBRA_PROBLEM])
        .output()
        .expect("run deepsolve");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    server.assert_clean();
    // `cargo test -p deepsolve-cli --test it geogebra -- --nocapture` shows the run.
    println!("{stdout}");

    // The figure model was asked twice: the misspelt command went back with its position.
    let figure_requests: Vec<_> = server
        .policy_requests()
        .into_iter()
        .filter(|r| r.tools.is_empty() && r.messages[0].content.contains("GeoGebra"))
        .collect();
    assert_eq!(figure_requests.len(), 2);
    let repair = figure_requests[1].last_user_text();
    assert!(
        repair.contains(&format!(
            "- command 5, column 1 (`{MISSPELT}`): unknown command 'Segmnt'; did you mean 'Segment'?"
        )),
        "{repair}"
    );

    // The SVG is in the workspace, byte for byte our rendering of the validated commands.
    let dir = workspace(&env);
    let svgs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "svg"))
        .collect();
    assert_eq!(svgs.len(), 1, "{svgs:?}");
    let saved = std::fs::read_to_string(&svgs[0]).unwrap();
    let checked = deepsolve_geometry::check(&FIGURE_COMMANDS.join("\n"));
    let ours = deepsolve_geometry::render_svg(&checked.construction, &Default::default());
    assert_eq!(saved, ours);
    assert!(saved.contains(">∠B = 36.87°</text>") && saved.contains(">90°</text>"));

    // The CLI lists it under the tool line and with the turn's files (progress is stderr's;
    // stdout is the answer alone).
    let listed = format!("{} (image/svg+xml,", svgs[0].display());
    assert!(stderr.contains(&format!("▸ {listed}")), "{stderr}");
    assert_eq!(stderr.matches(&listed).count(), 2, "{stderr}");
    assert!(!stdout.contains(&listed), "{stdout}");

    // The model read the table, and the answer uses it.
    let result = server
        .policy_requests()
        .iter()
        .flat_map(|r| r.tool_results())
        .find(|r| r.name.as_deref() == Some("geogebra_analysis"))
        .expect("the tool's result reached the model")
        .content;
    assert!(result.contains("```ggbscript\nA = (0, 0)\n"), "{result}");
    assert!(
        !result.contains("Segmnt(B, C)\n```"),
        "no invalid command in the script"
    );
    assert!(result.contains("| β (\"∠B\") | angle | Angle(C, B, A) | 36.8699° at (4, 0) |"));
    assert!(stdout.contains("∠B = 36.8699°"), "{stdout}");
}

/// A photographed problem and a main model that cannot see: `geogebra_analysis` hands the
/// photo to the vision model (`models.vision`), checks the commands it reads off the pixels,
/// draws the triangle as our SVG, and the answer states the angle the figure's table gives.
#[test]
fn a_photographed_triangle_is_read_by_the_vision_model_drawn_and_used_in_the_answer() {
    use deepsolve_testkit::images::Triangle;
    use deepsolve_testkit::policy::{ANGLE_C, Vision, answered_angle};

    let server = MockServer::policy(Vision);
    let env = Isolated::new();
    let photo = Triangle {
        width: 800,
        height: 600,
        a: (120, 500),
        b: (700, 480),
        c: (260, 110),
    };
    let image = env.path().join("triangle.png");
    std::fs::write(&image, photo.png()).expect("fixture image");
    let out = env
        .command()
        .args(["solve", "--base-url", &server.url(), "--model", "mock-main"])
        .args(["--set", "llm.vision=false"])
        .args(["--set", &format!("models.vision.base_url={}", server.url())])
        .args(["--set", "models.vision.model=mock-vision"])
        .args(["--tool", "geogebra_analysis", "--image"])
        .arg(&image)
        .arg("Find angle C.")
        .output()
        .expect("run deepsolve");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    server.assert_clean();

    // The main model never saw the photo; the vision model was asked once, with it.
    let requests = server.requests();
    let (to_vision, to_main): (Vec<_>, Vec<_>) = requests
        .iter()
        .partition(|r| r.body["model"] == "mock-vision");
    assert_eq!(to_vision.len(), 1, "one figure request, no repair needed");
    assert_eq!(to_vision[0].images().concat().len(), 1);
    assert!(to_main.iter().all(|r| r.images().concat().is_empty()));

    // The figure in the workspace is our rendering of the checked commands.
    let svg = std::fs::read_dir(workspace(&env))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "svg"))
        .expect("the figure was saved");
    let drawn = std::fs::read_to_string(&svg).unwrap();
    assert!(
        drawn.starts_with("<svg") && drawn.contains(">∠C = "),
        "{drawn}"
    );
    assert!(!drawn.contains("<script") && !drawn.contains("href"));

    // The answer's angle is the figure's, and the figure's is the photo's (to the rounding of
    // the vertices the model read).
    let angle = answered_angle(&stdout);
    assert!(
        (angle - photo.angle_c()).abs() < 0.5,
        "{angle} vs {}: {stdout}",
        photo.angle_c()
    );
    assert!(
        stdout.contains(&format!("From the figure: {ANGLE_C} = ")),
        "{stdout}"
    );
}
