use super::work::{self, answer, chart, rows, sentence};
use super::*;
use crate::job::{run, Job, Reply, Task};

/// A plan quick enough for a unit test: two GPUs, TP 1, two routers, 30 s runs, the
/// vLLM preset's server.
fn small() -> (PlanState, Params) {
    let s = PlanState {
        offers: vec![
            Offer {
                gpu: "A10G".into(),
                usd_per_gpu_hour: 1.0,
            },
            Offer {
                gpu: "H100".into(),
                usd_per_gpu_hour: 6.0,
            },
        ],
        tps: vec![1],
        horizon_s: 30.0,
        ..PlanState::default()
    };
    (s, crate::params::Preset::VllmA10g.params())
}

#[test]
fn the_url_round_trips_and_keeps_what_the_user_wrote() {
    let s = PlanState {
        rate: 35.0,
        profile: vec![(8.0, 5.0), (16.0, 35.0)],
        offers: vec![Offer {
            gpu: "A100-80GB".into(),
            usd_per_gpu_hour: 3.5,
        }],
        tps: vec![2, 4],
        routers: vec![RouterKind::Random, RouterKind::PowerOfD { d: 2 }],
        attainment: 0.95,
        disagg: true,
        ..PlanState::default()
    };
    let p = Params {
        slo_ttft_s: 0.5,
        llm: "Qwen2.5-7B".into(),
        ..Params::default()
    };
    let q = s.to_query(&p);
    assert!(q.starts_with("view=plan&prate=35&profile=8:5%2C16:35&gpus=A100-80GB:3.5&tp=2%2C4&routers=random%2Cpower_of_2&att=0.95&"), "{q}");
    assert!(wants_plan(&q) && !crate::fleet::wants_fleet(&q));
    let (back, bp, bad) = PlanState::from_query(&format!("?{q}"));
    assert_eq!((back, bp), (s, p));
    assert!(bad.is_empty(), "{bad:?}");
    // A price of 0 and an empty GPU list stay as written (the check says what is wrong);
    // a GPU the page does not know and a bad attainment are reported.
    let (z, _, bad) = PlanState::from_query("view=plan&gpus=L4:0&att=abc&tp=1%2Cx");
    assert_eq!(z.price("L4"), Some(0.0));
    assert_eq!(
        bad,
        vec![
            ("att".to_string(), "abc".to_string()),
            ("tp".to_string(), "1,x".to_string())
        ]
    );
    let (e, _, bad) = PlanState::from_query("view=plan&gpus=");
    assert!(e.offers.is_empty() && bad.is_empty());
    let (_, _, bad) = PlanState::from_query("view=plan&gpus=TPUv5:1");
    assert_eq!(bad, vec![("gpus".to_string(), "TPUv5:1".to_string())]);
    // A GPU without a price takes the preset's.
    let (d, _, _) = PlanState::from_query("view=plan&gpus=h100");
    assert_eq!(d.price("H100"), default_price("H100"));
}

#[test]
fn gpus_are_added_in_the_presets_order_and_removed() {
    let s = PlanState::default().with_gpu("A10G", None);
    assert_eq!(s.get("gpus"), "L4:0.8,H100:6");
    let s = s
        .with_gpu("A100-80GB", Some(4.5))
        .with_gpu("A10G", Some(1.0));
    assert_eq!(s.get("gpus"), "A10G:1,L4:0.8,A100-80GB:4.5,H100:6");
    assert_eq!(s.with_gpu("L4", Some(0.7)).price("L4"), Some(0.7));
}

#[test]
fn bad_inputs_get_a_message_beside_their_field() {
    let p = Params::default();
    assert_eq!(PlanState::default().check(&p), Ok(()));
    let key = |s: PlanState, p: &Params| s.check(p).unwrap_err().key;
    let none = PlanState {
        offers: Vec::new(),
        ..PlanState::default()
    };
    assert_eq!(key(none, &p), Some("gpus"));
    let free = PlanState::default().with_gpu("L4", Some(0.0));
    let e = free.check(&p).unwrap_err();
    assert_eq!(e.key, Some("price-L4"), "{e:?}");
    assert!(e.message.contains("> 0"), "{}", e.message);
    for att in [0.0, 1.0, 1.5, -0.2] {
        let s = PlanState {
            attainment: att,
            ..PlanState::default()
        };
        assert_eq!(key(s, &p), Some("att"), "attainment {att}");
    }
    for (k, q) in [
        (
            "slo_ttft",
            Params {
                slo_ttft_s: 0.0,
                ..Params::default()
            },
        ),
        (
            "slo_tpot",
            Params {
                slo_tpot_s: -0.05,
                ..Params::default()
            },
        ),
    ] {
        let e = PlanState::default().check(&q).unwrap_err();
        assert_eq!(e.key, Some(k), "{e:?}");
        assert!(e.message.contains("must be > 0"), "{}", e.message);
    }
    let no_tp = PlanState {
        tps: Vec::new(),
        ..PlanState::default()
    };
    assert_eq!(key(no_tp, &p), Some("tp"));
    let no_router = PlanState {
        routers: Vec::new(),
        ..PlanState::default()
    };
    assert_eq!(key(no_router, &p), Some("routers"));
    let zero = PlanState {
        rate: 0.0,
        ..PlanState::default()
    };
    assert_eq!(key(zero, &p), Some("prate"));
    let bad_seg = PlanState {
        profile: vec![(8.0, 5.0), (0.0, 3.0)],
        ..PlanState::default()
    };
    assert_eq!(key(bad_seg, &p), Some("profile"));
    // A server the engine refuses names its field.
    let b0 = Params {
        max_batch: 0,
        ..Params::default()
    };
    assert_eq!(PlanState::default().check(&b0).unwrap_err().key, Some("B"));
    // Too much simulation for the page.
    let long = PlanState {
        horizon_s: 3600.0,
        seeds: 10,
        rate: 2000.0,
        ..PlanState::default()
    };
    assert_eq!(key(long, &p), Some("pT"));
}

#[test]
fn a_plan_job_screens_confirms_and_its_sentence_names_a_fleet_of_the_table() {
    let (plan, params) = small();
    let job = Job {
        id: 9,
        params: params.clone(),
        tasks: vec![Task::Plan {
            plan,
            screen: true,
            ranks: vec![0, 1, 40],
            splits: 0,
        }],
    };
    let (mut screen, mut confirmed, mut nothing, mut progress) = (None, Vec::new(), 0, 0);
    run(&job, &mut |r| {
        let text = serde_json::to_string(&r).unwrap();
        match serde_json::from_str::<Reply>(&text).expect("reads back") {
            Reply::PlanScreen { screen: s, .. } => screen = Some(*s),
            Reply::PlanConfirmed {
                confirmed: Some(c), ..
            } => confirmed.push(*c),
            Reply::PlanConfirmed {
                confirmed: None, ..
            } => nothing += 1,
            Reply::Progress { done, .. } => progress = done,
            Reply::Error { message, .. } => panic!("{message}"),
            _ => {}
        }
    });
    assert_eq!(progress, 4, "the screen and three ranks");
    let screen = screen.expect("a screen");
    assert_eq!((confirmed.len(), nothing), (2, 1));
    assert_eq!(screen.screen.feasible.len(), 4, "2 GPUs × 2 routers");
    // The finalists are the model's two cheapest, in order.
    for (c, f) in confirmed.iter().zip(&screen.screen.feasible) {
        assert_eq!(&c.screened, f);
    }
    let (plan, _) = small();
    let text = sentence(&plan, &params, &screen, &confirmed, true);
    let best = answer(&confirmed).expect("a finalist meets the SLO");
    let name = work::confirmed_name(best);
    assert!(
        text.starts_with("The cheapest fleet that meets the SLO (90.0 % of requests within TTFT 1.00 s and TPOT 50.0 ms at 20 req/s) is ")
            && text.contains(&name)
            && text.contains("confirmed by simulation"),
        "{text}"
    );
    let table = rows(&screen, &confirmed);
    let row = table.iter().find(|r| r.answer).expect("the answer's row");
    assert_eq!(row.sim_fleet.as_deref(), Some(name.as_str()));
    assert_eq!(row.sim_meets, Some(true));
    assert_eq!(row.cells.len(), work::COLUMNS.len());
    // The simulated p99 TTFT stands beside the model's.
    let sim_p99 = &row.cells[13];
    assert!(sim_p99.contains(" ± ") && row.cells[6] != "–", "{row:?}");
    // Before the finalists are back the sentence is the model's.
    let early = sentence(&plan, &params, &screen, &[], false);
    assert!(
        early.starts_with("By the model") && early.ends_with("simulating the finalists…"),
        "{early}"
    );
    // The chart: the Pareto front, every candidate, the finalists; hover finds them.
    let (panel, pts) = chart(&params, &screen, &confirmed);
    assert_eq!(panel.series[1].points.len(), 4);
    assert_eq!(panel.series[2].points.len(), 2);
    assert!(!panel.series[0].points.is_empty());
    assert_eq!(panel.vlines[0].1, 1.0);
    let q = &pts[pts.len() - 1];
    let hit = work::nearest(
        &pts,
        |c| (c.x * 100.0, c.y * 100.0),
        (q.x * 100.0 + 2.0, q.y * 100.0),
        8.0,
    );
    assert!(hit.is_some_and(|t| t.contains("simulated")), "{hit:?}");
}

#[test]
fn when_nothing_meets_the_slo_the_page_says_which_slo_fails_and_by_how_much() {
    // A TPOT no GPU reaches for an 8B model: 2 ms per token.
    let (plan, mut params) = small();
    params.slo_tpot_s = 0.002;
    let s = work::screen(&plan, &params).unwrap();
    assert!(s.screen.feasible.is_empty());
    let text = sentence(&plan, &params, &s, &[], true);
    assert!(text.starts_with("No candidate meets the SLO"), "{text}");
    assert!(text.contains("over the TPOT SLO of 2.00 ms"), "{text}");
    assert!(
        text.contains("The nearest, H100"),
        "the faster GPU is nearer: {text}"
    );
}

#[test]
fn a_profile_gives_each_segment_its_count_and_the_periods_price() {
    let (mut plan, params) = small();
    plan.profile = vec![(8.0, 4.0), (8.0, 20.0)];
    let s = work::screen(&plan, &params).unwrap();
    assert_eq!(s.segments.len(), 2);
    let n: Vec<u32> = s.segments.iter().map(|g| g.replicas.unwrap()).collect();
    assert!(n[0] < n[1], "{n:?}");
    assert_eq!(n[1], s.screen.best().unwrap().replicas);
    let lines = work::profile_lines(&s, &[]);
    assert_eq!(lines.len(), 3);
    assert!(
        lines[2].starts_with("over 16.0 h: $") && lines[2].contains("resized"),
        "{lines:?}"
    );
}

#[test]
fn the_link_is_in_the_url_and_checked_beside_its_field() {
    let (mut s, p) = small();
    s.disagg = true;
    s.link_gbps = 25.0;
    s.link_ms = 2.5;
    s.first_token = engine::disagg::FirstTokenFrom::Prefill;
    let q = s.to_query(&p);
    assert!(
        q.contains("&disagg=1&plink=25&plat=2.5&pfirst=prefill&"),
        "{q}"
    );
    let (back, _, bad) = PlanState::from_query(&q);
    assert!(bad.is_empty(), "{bad:?}");
    assert_eq!(back.disagg_plan(), s.disagg_plan());
    assert_eq!(s.disagg_plan().bandwidth_bytes_per_s, 25e9 / 8.0);
    assert_eq!(s.disagg_plan().latency_s, 0.0025);
    // An infinite link is allowed; a first token from nowhere is reported from the URL.
    let (inf, _, bad) = PlanState::from_query("view=plan&disagg=1&plink=inf&pfirst=middle&plat=x");
    assert_eq!(inf.link_gbps, f64::INFINITY);
    assert_eq!(
        bad,
        vec![
            ("pfirst".to_string(), "middle".to_string()),
            ("plat".to_string(), "x".to_string())
        ]
    );
    assert!(inf
        .edited("pfirst", "middle")
        .unwrap_err()
        .contains("first token from"));
    // Out of range: the error names the field, only when the splits are asked for.
    let key = |s: &PlanState| s.check(&p).err().and_then(|e| e.key);
    s.link_gbps = 0.0;
    assert_eq!(key(&s), Some("plink"));
    s.disagg = false;
    assert_eq!(key(&s), None);
    s.disagg = true;
    s.link_gbps = 25.0;
    s.link_ms = -1.0;
    assert_eq!(key(&s), Some("plat"));
    let e = s.check(&p).unwrap_err().message;
    assert!(e.contains("link latency [ms]") && e.contains(">= 0"), "{e}");
}

#[test]
fn a_plan_job_confirms_the_disaggregated_finalists_by_simulation() {
    let (mut plan, params) = small();
    plan.offers.truncate(1);
    plan.routers = vec![RouterKind::LeastOutstanding];
    plan.disagg = true;
    plan.link_gbps = 25.0;
    let job = Job {
        id: 3,
        params: params.clone(),
        tasks: vec![Task::Plan {
            plan: plan.clone(),
            screen: true,
            ranks: vec![0],
            splits: 2,
        }],
    };
    let (mut screen, mut splits, mut fleets, mut progress) = (None, Vec::new(), 0, 0);
    run(&job, &mut |r| match r {
        Reply::PlanScreen { screen: s, .. } => screen = Some(*s),
        Reply::PlanConfirmed {
            split: Some(c),
            confirmed: None,
            rank,
            ..
        } => splits.push((rank, *c)),
        Reply::PlanConfirmed {
            confirmed: Some(_),
            split: None,
            ..
        } => fleets += 1,
        Reply::Progress { done, .. } => progress = done,
        Reply::Error { message, .. } => panic!("{message}"),
        _ => {}
    });
    assert_eq!(progress, 4, "the screen, a fleet and two split ranks");
    let screen = screen.expect("a screen");
    assert_eq!(fleets, 1);
    // One family: one split, confirmed; the second rank has none.
    assert_eq!(screen.disagg.len(), 1, "{:?}", screen.disagg_none);
    assert_eq!(splits.len(), 1);
    let (rank, c) = splits[0].clone();
    let c = &c;
    assert_eq!(rank, 0);
    assert_eq!(c.screened, screen.disagg[0]);
    assert!(c.meets, "{c:?}");
    assert!(c.at.attainment.mean.unwrap() >= plan.attainment);
    assert_eq!(c.at.attainment.n, plan.seeds);
    let confirmed: Vec<_> = splits.into_iter().map(|x| x.1).collect();
    let rows = split::split_rows(&screen, &confirmed);
    assert_eq!(rows.len(), 1);
    let r = &rows[0];
    assert!(r.answer && r.sim_meets == Some(true));
    assert_eq!(r.cells.len(), split::SPLIT_COLUMNS.len());
    assert_eq!(
        r.sim_split.as_deref(),
        Some(split::confirmed_name(c).as_str())
    );
    // The simulated p99 TTFT and TPOT beside the model's.
    assert!(
        r.cells[9].contains(" ± ") && r.cells[10].contains(" ± "),
        "{r:?}"
    );
    let text = split::split_sentence(&plan, &screen, &confirmed, true);
    assert!(
        text.starts_with("Disaggregated (25 Gb/s link, 0 ms latency, first token from the decode pool): the cheapest split that meets the SLO is ")
            && text.contains(&split::confirmed_name(c))
            && text.contains("confirmed by simulation"),
        "{text}"
    );
    // A finalist that misses in simulation is said so, and is not the answer.
    let mut miss = c.clone();
    miss.meets = false;
    let rows = split::split_rows(&screen, std::slice::from_ref(&miss));
    assert!(!rows[0].answer && rows[0].cells[7].ends_with("(miss)"));
    let text = split::split_sentence(&plan, &screen, &[miss], true);
    assert!(
        text.contains("no finalist meets the SLO in simulation"),
        "{text}"
    );
}
