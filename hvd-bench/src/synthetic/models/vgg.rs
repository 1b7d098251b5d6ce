//! VGG-16 without batch norm (torchvision's `vgg16`, configuration "D").

use super::{Layer, LayerList, Shape, Window};

/// Output channels of each 3×3 convolution; `None` is a 2×2 max pool.
const CONFIG_D: [Option<usize>; 18] = [
    Some(64),
    Some(64),
    None,
    Some(128),
    Some(128),
    None,
    Some(256),
    Some(256),
    Some(256),
    None,
    Some(512),
    Some(512),
    Some(512),
    None,
    Some(512),
    Some(512),
    Some(512),
    None,
];

/// The side of the adaptive average pool in front of the classifier.
const POOLED: usize = 7;

pub fn vgg16() -> Vec<Layer> {
    let mut layers = LayerList::default();
    let mut x = Shape::image(224);
    // torchvision numbers every module of `features`: a convolution and its ReLU take two
    // indices, a pool one.
    let mut index = 0;
    for entry in CONFIG_D {
        match entry {
            Some(channels) => {
                x = layers.conv(
                    &format!("features.{index}"),
                    x,
                    channels,
                    Window::square(3, 1, 1),
                    true,
                );
                index += 2;
            }
            None => {
                x = x.pooled(Window::square(2, 2, 0));
                index += 1;
            }
        }
    }
    // Linear, ReLU, Dropout, Linear, ReLU, Dropout, Linear.
    layers.linear("classifier.0", x.channels * POOLED * POOLED, 4096);
    layers.linear("classifier.3", 4096, 4096);
    layers.linear("classifier.6", 4096, 1000);
    layers.into_layers()
}
