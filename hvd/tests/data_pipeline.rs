//! `hvd::data`'s loader and `hvd::elastic`'s sampler are one: a sampler whose place the
//! job committed in its `TensorState` restarts the loader exactly there.
#![cfg(feature = "data")]

use hvd::data::{Augment, Loader, LoaderOptions, Synthetic};
use hvd::elastic::{ElasticSampler, TensorState};

#[test]
fn the_loader_goes_on_from_the_place_the_elastic_state_restored() {
    let options = LoaderOptions {
        threads: 2,
        ..Default::default()
    };
    let mut loader = Loader::new(Synthetic::new(30, 8, 8, 3), Augment::train(4), options).unwrap();
    let mut sampler = ElasticSampler::new(30, 4).seed(Some(11));
    let mut state = TensorState::new();
    let mut after_commit = Vec::new();
    {
        let mut epoch = loader.epoch(&sampler, 1, 2).unwrap();
        for step in 0..5 {
            let batch = epoch.next_batch().unwrap().unwrap();
            if step >= 3 {
                after_commit.push(batch.indices().to_vec());
            }
            sampler.advance();
            if step == 2 {
                sampler.save_to(&mut state, "sampler");
            }
        }
    }
    // A rank lost: the job restores the commit, and a new round starts from it.
    let mut restored = ElasticSampler::new(30, 4).seed(Some(11));
    restored.load_from(&state, "sampler");
    assert_eq!(restored.consumed(), 12);
    let mut epoch = loader.epoch(&restored, 1, 2).unwrap();
    for expected in after_commit {
        assert_eq!(epoch.next_batch().unwrap().unwrap().indices(), expected);
    }
}
