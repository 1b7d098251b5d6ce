"""Horovod's PyTorch MNIST recipe with its import changed to hvd's.

    hvdrun -np 2 python examples/pytorch/train_mnist.py --epochs 1
    mpirun -np 2 python examples/pytorch/train_mnist.py --epochs 1
    torchrun --nproc_per_node 2 examples/pytorch/train_mnist.py --epochs 1

It reads MNIST through torchvision (`pip install torchvision`; downloaded into
--data-dir if missing). Without torchvision, or with --synthetic, it trains on a synthetic
stand-in of the same shape, built the same way on every rank (see `synthetic_mnist`).
Besides the import, three deprecated calls of the original are updated (log_softmax's dim,
nll_loss's reduction, torch.as_tensor for a tensor), so current torch prints no warnings,
and the GPU is its local rank modulo the GPUs, so more ranks than GPUs share them.
"""
import argparse
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import torch.utils.data.distributed

import hvd.torch as hvd  # was: import horovod.torch as hvd

parser = argparse.ArgumentParser(description='PyTorch MNIST Example')
parser.add_argument('--batch-size', type=int, default=64, metavar='N',
                    help='input batch size for training (default: 64)')
parser.add_argument('--test-batch-size', type=int, default=1000, metavar='N',
                    help='input batch size for testing (default: 1000)')
parser.add_argument('--epochs', type=int, default=10, metavar='N',
                    help='number of epochs to train (default: 10)')
parser.add_argument('--lr', type=float, default=0.01, metavar='LR',
                    help='learning rate (default: 0.01)')
parser.add_argument('--momentum', type=float, default=0.5, metavar='M',
                    help='SGD momentum (default: 0.5)')
parser.add_argument('--no-cuda', action='store_true', default=False,
                    help='disables CUDA training')
parser.add_argument('--seed', type=int, default=42, metavar='S',
                    help='random seed (default: 42)')
parser.add_argument('--log-interval', type=int, default=10, metavar='N',
                    help='how many batches to wait before logging training status')
parser.add_argument('--fp16-allreduce', action='store_true', default=False,
                    help='use fp16 compression during allreduce')
parser.add_argument('--gradient-predivide-factor', type=float, default=1.0,
                    help='apply gradient predivide factor in optimizer (default: 1.0)')
parser.add_argument('--data-dir',
                    help='location of the training dataset in the local filesystem (will be downloaded if needed)')
parser.add_argument('--synthetic', action='store_true', default=False,
                    help='train on the synthetic stand-in even when torchvision is installed')
parser.add_argument('--synthetic-size', type=int, default=60000, metavar='N',
                    help='training examples of the synthetic stand-in (default: 60000; '
                         'the test set is a sixth of it)')


def synthetic_mnist(size, seed):
    """Ten classes of 28x28 grey images, the same on every rank: each class is a fixed
    template of four thick strokes in the central 16x16 area; an example is its class's
    template shifted by up to 3 pixels each way, at 50-100 % contrast, with Gaussian
    noise (sigma 0.4), clipped to [0, 1] and normalised like MNIST. A small CNN learns
    most of it in one epoch, never quite all."""
    g = torch.Generator().manual_seed(0x5eed)
    templates = torch.zeros(10, 28, 28)
    for c in range(10):
        for _ in range(4):
            x0, y0, x1, y1 = (6 + torch.randint(0, 16, (4,), generator=g)).tolist()
            for t in torch.linspace(0, 1, 33).tolist():
                x, y = round(x0 + t * (x1 - x0)), round(y0 + t * (y1 - y0))
                templates[c, y - 1:y + 2, x - 1:x + 2] = 1.0
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 10, (size,), generator=g)
    images = templates[labels]
    shifts = torch.randint(-3, 4, (size, 2), generator=g)
    for dy in range(-3, 4):
        for dx in range(-3, 4):
            picked = ((shifts[:, 0] == dy) & (shifts[:, 1] == dx)).nonzero().squeeze(1)
            images[picked] = images[picked].roll((dy, dx), dims=(1, 2))
    images = images * (0.5 + 0.5 * torch.rand(size, 1, 1, generator=g))
    images = (images + 0.4 * torch.randn(images.shape, generator=g)).clamp(0, 1)
    images = (images - 0.1307) / 0.3081
    return torch.utils.data.TensorDataset(images.unsqueeze(1), labels)


def mnist_datasets(args):
    """MNIST's training and test sets through torchvision, else the synthetic stand-in."""
    if not args.synthetic:
        try:
            from filelock import FileLock
            from torchvision import datasets, transforms
        except ImportError as missing:
            if hvd.rank() == 0:
                print(f'{missing.name} is not installed (pip install torchvision filelock '
                      'for MNIST): training on the synthetic stand-in', flush=True)
        else:
            data_dir = args.data_dir or './data'
            transform = transforms.Compose([
                transforms.ToTensor(),
                transforms.Normalize((0.1307,), (0.3081,))
            ])
            with FileLock(os.path.expanduser("~/.horovod_lock")):
                train_dataset = \
                    datasets.MNIST(data_dir, train=True, download=True, transform=transform)
            test_dataset = datasets.MNIST(data_dir, train=False, transform=transform)
            return train_dataset, test_dataset
    return (synthetic_mnist(args.synthetic_size, seed=1),
            synthetic_mnist(max(args.synthetic_size // 6, 1), seed=2))


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, 320)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, training=self.training)
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


def train(epoch):
    model.train()
    # Horovod: set epoch to sampler for shuffling.
    train_sampler.set_epoch(epoch)
    for batch_idx, (data, target) in enumerate(train_loader):
        if args.cuda:
            data, target = data.cuda(), target.cuda()
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        if batch_idx % args.log_interval == 0:
            # Horovod: use train_sampler to determine the number of examples in
            # this worker's partition.
            print('Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}'.format(
                epoch, batch_idx * len(data), len(train_sampler),
                100. * batch_idx / len(train_loader), loss.item()))


def metric_average(val, name):
    tensor = torch.as_tensor(val)
    avg_tensor = hvd.allreduce(tensor, name=name)
    return avg_tensor.item()


def test():
    model.eval()
    test_loss = 0.
    test_accuracy = 0.
    for data, target in test_loader:
        if args.cuda:
            data, target = data.cuda(), target.cuda()
        output = model(data)
        # sum up batch loss
        test_loss += F.nll_loss(output, target, reduction='sum').item()
        # get the index of the max log-probability
        pred = output.data.max(1, keepdim=True)[1]
        test_accuracy += pred.eq(target.data.view_as(pred)).cpu().float().sum()

    # Horovod: use test_sampler to determine the number of examples in
    # this worker's partition.
    test_loss /= len(test_sampler)
    test_accuracy /= len(test_sampler)

    # Horovod: average metric values across workers.
    test_loss = metric_average(test_loss, 'avg_loss')
    test_accuracy = metric_average(test_accuracy, 'avg_accuracy')

    # Horovod: print output only on first rank.
    if hvd.rank() == 0:
        print('\nTest set: Average loss: {:.4f}, Accuracy: {:.2f}%\n'.format(
            test_loss, 100. * test_accuracy))


if __name__ == '__main__':
    args = parser.parse_args()
    args.cuda = not args.no_cuda and torch.cuda.is_available()

    # Horovod: initialize library.
    hvd.init()
    torch.manual_seed(args.seed)

    if args.cuda:
        # Horovod: pin GPU to local rank (ranks beyond the GPUs share them).
        torch.cuda.set_device(hvd.local_rank() % torch.cuda.device_count())
        torch.cuda.manual_seed(args.seed)

    # Horovod: limit # of CPU threads to be used per worker.
    torch.set_num_threads(1)

    kwargs = {'num_workers': 1, 'pin_memory': True} if args.cuda else {}
    train_dataset, test_dataset = mnist_datasets(args)

    # Horovod: use DistributedSampler to partition the training data.
    train_sampler = torch.utils.data.distributed.DistributedSampler(
        train_dataset, num_replicas=hvd.size(), rank=hvd.rank())
    train_loader = torch.utils.data.DataLoader(
        train_dataset, batch_size=args.batch_size, sampler=train_sampler, **kwargs)

    # Horovod: use DistributedSampler to partition the test data.
    test_sampler = torch.utils.data.distributed.DistributedSampler(
        test_dataset, num_replicas=hvd.size(), rank=hvd.rank())
    test_loader = torch.utils.data.DataLoader(test_dataset, batch_size=args.test_batch_size,
                                              sampler=test_sampler, **kwargs)

    model = Net()

    # By default, Adasum doesn't need scaling up learning rate.
    lr_scaler = hvd.size()

    if args.cuda:
        # Move model to GPU.
        model.cuda()

    # Horovod: scale learning rate by lr_scaler.
    optimizer = optim.SGD(model.parameters(), lr=args.lr * lr_scaler,
                          momentum=args.momentum)

    # Horovod: broadcast parameters & optimizer state.
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    # Horovod: (optional) compression algorithm.
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none

    # Horovod: wrap optimizer with DistributedOptimizer.
    optimizer = hvd.DistributedOptimizer(optimizer,
                                         named_parameters=model.named_parameters(),
                                         compression=compression,
                                         op=hvd.Average,
                                         gradient_predivide_factor=args.gradient_predivide_factor)

    for epoch in range(1, args.epochs + 1):
        train(epoch)
        test()
