"""resnet: image classification (MLPerf: ResNet-50 v1.5 on ImageNet; mini: Fashion-MNIST)."""
